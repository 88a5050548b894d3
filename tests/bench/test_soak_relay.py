"""The soak's relay records when it kept the composer from the Director."""

from __future__ import annotations

import socket
import threading
import time

from bench.soak.proxy import Relay


def test_cuts_are_recorded_as_windows_and_overlapping_cuts_end_at_the_last_heal() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    relay = Relay(server.getsockname()[1])
    try:
        assert relay.cut_off() == []
        t0 = time.time()
        relay.cut("blackhole")
        relay.cut("reset")  # a second partition while the first holds
        ongoing = relay.cut_off()
        assert len(ongoing) == 1 and t0 <= ongoing[0][0] <= ongoing[0][1]
        relay.heal("blackhole")  # the reset partition still holds
        assert relay.mode == "reset" and relay.cut_off()[0][1] >= ongoing[0][1]
        relay.heal("reset")  # the last one: the window ends here
        windows = relay.cut_off()
        assert len(windows) == 1 and relay.mode == "open"
        relay.cut("reset")
        relay.heal("reset")
        second = relay.cut_off()
        assert len(second) == 2 and second[0] == windows[0] and second[0][1] <= second[1][0]
    finally:
        relay.close()
        server.close()


def test_a_cut_refuses_connections_and_a_heal_relays_again() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[bytes] = []

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            accepted.append(conn.recv(16))
            conn.sendall(b"pong")

    relay = Relay(server.getsockname()[1])
    try:
        relay.cut("reset")
        try:
            with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as c:
                c.sendall(b"ping")
                got = c.recv(4)
        except ConnectionResetError:  # aborted by the relay (RST), at connect or after
            got = b""
        assert got == b"" and not accepted
        relay.heal("reset")
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as c:
            c.sendall(b"ping")
            assert c.recv(4) == b"pong"
        t.join(5)
        assert accepted == [b"ping"]
    finally:
        relay.close()
        server.close()
