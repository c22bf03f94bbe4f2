import pytest


@pytest.mark.mpi(ranks=4)
def test_ring_messages_match(run_traced, any_mpi):
    t = run_traced("ring", 4, args=["3", "64"], mpi=any_mpi)
    m = t.messages().collect()
    assert m.height == 12
    assert set(zip(m["src"], m["dst"])) == {(r, (r + 1) % 4) for r in range(4)}
    assert (m["t_recv_leave_ns"] >= m["t_send_enter_ns"]).all()
