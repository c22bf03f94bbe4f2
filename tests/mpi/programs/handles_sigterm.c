/* A program with its own SIGTERM handler, installed before MPI_Init, sent one
 * halfway through. With no argument the handler sets a flag and returns: the
 * program goes on (as one that writes a checkpoint before a batch system's
 * SIGTERM turns into SIGKILL) and so must its recording. With "exit" the
 * handler ends the process (_exit(3)): the rank was stopped by the signal; it
 * first sleeps a second, as the first rank to exit makes the launcher kill the
 * others, and on a loaded machine the other rank may not have raised its own
 * SIGTERM yet (it was then killed, "cut off", which the test does not ask about).
 * With "kill" the program goes on and then dies of SIGKILL before MPI_Finalize. */
#include <mpi.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t asked_to_stop;
static int exit_in_handler;

static void on_term(int sig)
{
    (void)sig;
    if (exit_in_handler) {
        sleep(1);  /* async-signal-safe */
        _exit(3);
    }
    asked_to_stop = 1;
}

int main(int argc, char **argv)
{
    exit_in_handler = argc > 1 && strcmp(argv[1], "exit") == 0;
    signal(SIGTERM, on_term);
    MPI_Init(&argc, &argv);
    for (int i = 0; i < 5; i++) MPI_Barrier(MPI_COMM_WORLD);
    raise(SIGTERM);
    for (int i = 0; i < 5; i++) MPI_Barrier(MPI_COMM_WORLD);
    if (argc > 1 && strcmp(argv[1], "kill") == 0) raise(SIGKILL);
    MPI_Finalize();
    return asked_to_stop ? 0 : 1;
}
