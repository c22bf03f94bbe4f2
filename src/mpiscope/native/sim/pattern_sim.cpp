/* Runs a communication pattern on a SimGrid platform through S4U, with no MPI
 * layer: each message is one host-to-host communication (Comm::sendto_async)
 * on the platform's links and flow model.
 *
 *   pattern_sim PLATFORM.xml MESSAGES.bin OUT.tsv [--steps] [--precision-share=F] [--cfg=name:value ...]
 *
 * MESSAGES.bin holds fixed 24-byte records (struct msg below), written by
 * mpiscope.sim.s4u. Hosts are named "n<index>" (mpiscope.sim.platform).
 * One-step mode injects every message at t = 0 (001 §7.2: "all steps at once");
 * --steps injects step k only when every message of step k-1 has arrived.
 * --precision-share=F sets SimGrid's event-time precision (surf/precision) to F
 * times a lower bound on the simulated time: the busiest link's bytes over its
 * bandwidth, on SimGrid's own routes (see main).
 * OUT.tsv gets the simulated time, the end of each step, the precision used,
 * the number of simulated instants, and the bytes that crossed each link on
 * SimGrid's own routes. Progress goes to stderr as "progress DONE TOTAL SIMTIME"
 * lines, at most a few per second.
 *
 * Built at first use by mpiscope (g++ and `pkg-config simgrid`), so a SimGrid
 * installed after mpiscope still works; the source ships in the wheel.
 */

#include <simgrid/kernel/resource/Action.hpp>
#include <simgrid/s4u.hpp>
#include <xbt/config.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace sg4 = simgrid::s4u;
namespace kernel = simgrid::kernel;
using Action = simgrid::kernel::resource::Action;

namespace {

struct msg {
  int32_t src;   // host index
  int32_t dst;   // host index
  int32_t step;  // step of the pattern (0 for single-step patterns)
  int32_t pad;   // keeps bytes 8-aligned, as numpy writes it
  uint64_t bytes;
};
static_assert(sizeof(msg) == 24, "record layout shared with mpiscope.sim.s4u");

struct Run {
  std::vector<msg> msgs;
  std::vector<sg4::Host*> host_of;  // host index -> host
  bool steps = false;
  std::map<int32_t, double> step_end;  // step -> simulated time its last message arrived
  size_t done = 0;                     // messages delivered
  size_t instants = 0;                 // simulated instants, each one bandwidth-sharing solve
  size_t pending = 0;                  // messages of the current injection still in flight
  sg4::ActorPtr injector;
  std::vector<sg4::CommPtr> comms;     // kept alive until the end; nobody waits on them
};

Run run_state;

bool read_messages(const char* path, std::vector<msg>& out)
{
  FILE* f = std::fopen(path, "rb");
  if (!f)
    return false;
  std::fseek(f, 0, SEEK_END);
  long size = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  if (size < 0 || size % static_cast<long>(sizeof(msg)) != 0) {
    std::fclose(f);
    return false;
  }
  out.resize(static_cast<size_t>(size) / sizeof(msg));
  size_t got = out.empty() ? 0 : std::fread(out.data(), sizeof(msg), out.size(), f);
  std::fclose(f);
  return got == out.size();
}

/* Resolve only the hosts the pattern uses: a 16,384-node platform has more
 * hosts than a small pattern touches, and by_name is a map lookup. */
bool resolve_hosts(const sg4::Engine& e, Run& run)
{
  int32_t top = 0;
  for (const msg& m : run.msgs)
    top = std::max({top, m.src, m.dst});
  run.host_of.assign(static_cast<size_t>(top) + 1, nullptr);
  for (const msg& m : run.msgs)
    for (int32_t h : {m.src, m.dst}) {
      if (h < 0)
        return false;
      if (!run.host_of[h]) {
        run.host_of[h] = e.host_by_name_or_null("n" + std::to_string(h));
        if (!run.host_of[h]) {
          std::fprintf(stderr, "error: host n%d is not in the platform\n", h);
          return false;
        }
      }
    }
  return true;
}

/* Start messages [begin, end) and sleep until all have arrived. The injector
 * does not wait on each communication: that would cost one scheduling round,
 * hence one bandwidth-sharing solve, per message (identity 4096-rank Bruck:
 * 37 s instead of 27 s of CPU); the link callback below counts arrivals
 * instead, all of a simulated instant at once, and wakes the injector. */
void inject(size_t begin, size_t end)
{
  run_state.pending = 0;
  for (size_t i = begin; i < end; i++) {
    const msg& m = run_state.msgs[i];
    // SimGrid never starts a host-to-host communication of 0 bytes. An empty message on a node
    // costs nothing; across the network it costs the route latency: send 1 byte (0.2 ns at 5 GB/s).
    if (m.bytes == 0 && m.src == m.dst) {
      run_state.done++;
      continue;
    }
    run_state.pending++;
    run_state.comms.push_back(sg4::Comm::sendto_async(run_state.host_of[m.src], run_state.host_of[m.dst],
                                                      m.bytes > 0 ? m.bytes : 1));
  }
  // Arrivals are processed by maestro, only once every actor is blocked: none can come before this.
  if (run_state.pending > 0)
    sg4::this_actor::suspend();
}

/* The injector: one actor starts the communications; they do not need actors
 * on their end hosts (sendto is host-to-host). */
void injector()
{
  auto& msgs = run_state.msgs;
  if (!run_state.steps) {
    inject(0, msgs.size());
    run_state.step_end[0] = sg4::Engine::get_clock();
    return;
  }
  std::stable_sort(msgs.begin(), msgs.end(), [](const msg& a, const msg& b) { return a.step < b.step; });
  size_t begin = 0;
  while (begin < msgs.size()) {
    size_t end = begin;
    while (end < msgs.size() && msgs[end].step == msgs[begin].step)
      end++;
    inject(begin, end);
    run_state.step_end[msgs[begin].step] = sg4::Engine::get_clock();
    begin = end;
  }
}

/* Bytes per link on the route SimGrid itself uses for each message. */
std::unordered_map<sg4::Link*, double> link_bytes(const Run& run)
{
  std::unordered_map<sg4::Link*, double> bytes;
  std::vector<sg4::Link*> route;
  for (const msg& m : run.msgs) {
    route.clear();
    double latency = 0;
    run.host_of[m.src]->route_to(run.host_of[m.dst], route, &latency);
    for (sg4::Link* l : route)
      bytes[l] += static_cast<double>(m.bytes);
  }
  return bytes;
}

/* A lower bound on the simulated time: the busiest link's bytes over its bandwidth. */
double busiest_link_time(const std::unordered_map<sg4::Link*, double>& bytes)
{
  double bound_s = 0;
  for (const auto& [link, b] : bytes)
    bound_s = std::max(bound_s, b / link->get_bandwidth());
  return bound_s;
}

void report_progress()
{
  using clock = std::chrono::steady_clock;
  static clock::time_point last = clock::now();
  run_state.done++;
  clock::time_point now = clock::now();  // ~20 ns, nothing beside a solver step
  if (now - last < std::chrono::milliseconds(250) && run_state.done != run_state.msgs.size())
    return;
  last = now;
  std::fprintf(stderr, "progress %zu %zu %.9g\n", run_state.done, run_state.msgs.size(), sg4::Engine::get_clock());
  std::fflush(stderr);
}

void arrived()
{
  report_progress();
  if (--run_state.pending == 0)
    run_state.injector->resume();
}

}  // namespace

int main(int argc, char* argv[])
{
  sg4::Engine e(&argc, argv);  // consumes the --cfg=... arguments
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s PLATFORM.xml MESSAGES.bin OUT.tsv [--steps] [--precision-share=F]\n", argv[0]);
    return 2;
  }
  double share = 0;  // 0: the surf/precision given with --cfg, or SimGrid's default
  for (int i = 4; i < argc; i++) {
    run_state.steps = run_state.steps || std::strcmp(argv[i], "--steps") == 0;
    if (std::strncmp(argv[i], "--precision-share=", 18) == 0)
      share = std::atof(argv[i] + 18);
  }
  if (!read_messages(argv[2], run_state.msgs)) {
    std::fprintf(stderr, "error: cannot read the message records in %s\n", argv[2]);
    return 2;
  }
  e.load_platform(argv[1]);
  if (run_state.msgs.empty() || !resolve_hosts(e, run_state))
    return 2;
  const auto bytes   = link_bytes(run_state);
  const double bound = busiest_link_time(bytes);
  /* Events closer than surf/precision are processed together (SimGrid's lazy update finishes every
   * flow due within it), and on an irregular map each event costs a solve of the whole sharing
   * problem: SimGrid's max-min rescans every loaded link once per sharing level, and with flows
   * weighted by 1/route latency most links are a level of their own (perf: 82 % of the time in that
   * scan). The one-step 4096-rank Bruck on an annealed map has thousands of distinct arrival instants
   * at 120 ns, each about a second while most flows are in flight. A flow finished early loses at
   * most one precision, so the simulated time moves by about that much (measured: always shorter, by
   * less than 1.2 precisions); as a share of a lower bound on the simulated time it is a relative
   * accuracy. Never finer than SimGrid's default 1 ns. */
  if (share > 0)
    sg4::Engine::set_config("surf/precision", std::max(1e-9, share * bound));

  // A network action leaving STARTED has delivered its message (or failed: links never fail here).
  sg4::Link::on_communication_state_change_cb([](kernel::resource::NetworkAction const&, Action::State previous) {
    if (previous == Action::State::STARTED)
      arrived();
  });
  sg4::Engine::on_time_advance_cb([](double) { run_state.instants++; });
  run_state.comms.reserve(run_state.msgs.size());
  run_state.injector = sg4::Actor::create("injector", run_state.host_of[run_state.msgs[0].src], injector);
  e.run();

  FILE* out = std::fopen(argv[3], "w");
  if (!out) {
    std::fprintf(stderr, "error: cannot write %s\n", argv[3]);
    return 2;
  }
  std::fprintf(out, "simulated_time_s\t%.17g\n", sg4::Engine::get_clock());
  std::fprintf(out, "time_precision_s\t%.17g\n", simgrid::config::get_value<double>("surf/precision"));
  std::fprintf(out, "link_bound_s\t%.17g\n", bound);
  std::fprintf(out, "instants\t%zu\n", run_state.instants);
  for (const auto& [step, t] : run_state.step_end)
    std::fprintf(out, "step_end_s\t%d\t%.17g\n", step, t);
  for (const auto& [link, b] : bytes)
    std::fprintf(out, "link\t%s\t%.17g\n", link->get_cname(), b);
  return std::fclose(out) == 0 ? 0 : 2;
}
