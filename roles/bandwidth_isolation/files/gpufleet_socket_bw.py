#!/usr/bin/python3
"""TCP bandwidth between nodes (or over loopback), measured at the receiver. Standard library only.

  serve --bind ADDR --port P --pidfile F [--idle-timeout S]   one receiver; stops after S idle seconds
  send --to ADDR --port P [--seconds S]                        send for S seconds, print the receiver's figure
  loopback [--seconds S]                                       both ends on 127.0.0.1 (the node's own CPU/memory)
  stop --pidfile F                                             end the receiver this tool started, by its PID

Figures are Gb/s of payload over a TCP socket on the CPU: a socket figure, never an NCCL or RDMA one.
"""

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time

CHUNK = 1 << 20
# A small send buffer bounds what is still queued when the sender stops, so a slow link drains fast.
SNDBUF = 256 * 1024


def receive_one(conn):
    conn.settimeout(120)
    header = b""
    while not header.endswith(b"\n"):
        byte = conn.recv(1)
        if not byte:
            return None
        header += byte
    request = json.loads(header)
    if request.get("stop"):
        conn.sendall(b'{"stopped": true}\n')
        return "stop"
    received, first, last = 0, None, None
    while True:
        data = conn.recv(CHUNK)
        if not data:
            break
        now = time.monotonic()
        first = first or now
        last = now
        received += len(data)
    seconds = (last - first) if first and last and last > first else None
    gbps = received * 8 / seconds / 1e9 if seconds else None
    conn.sendall((json.dumps({"bytes": received, "seconds": seconds, "gbps": gbps}) + "\n").encode())
    return "ok"


def serve(bind, port, idle_timeout, pidfile=None, ready=None, once=False):
    if pidfile:
        with open(pidfile, "w") as handle:
            handle.write("%d\n" % os.getpid())
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((bind, port))
    server.listen(8)
    server.settimeout(idle_timeout)
    if ready is not None:
        ready.append(server.getsockname()[1])
    try:
        while True:
            try:
                conn, _addr = server.accept()
            except socket.timeout:
                return 0
            with conn:
                if receive_one(conn) == "stop" or once:
                    return 0
    finally:
        server.close()
        if pidfile and os.path.exists(pidfile):
            os.unlink(pidfile)


def send(to, port, seconds, connect_timeout=30):
    sock = socket.create_connection((to, port), timeout=connect_timeout)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SNDBUF)
    sock.settimeout(120)
    payload = bytes(CHUNK)
    sock.sendall(json.dumps({"seconds": seconds}).encode() + b"\n")
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end:
        sock.sendall(payload)
        sent += len(payload)
    sock.shutdown(socket.SHUT_WR)
    reply = b""
    while not reply.endswith(b"\n"):
        data = sock.recv(4096)
        if not data:
            break
        reply += data
    sock.close()
    result = json.loads(reply) if reply else {"bytes": None, "seconds": None, "gbps": None}
    result.update(sent=sent, to=to, transport="tcp-socket")
    return result


def loopback(seconds):
    ready = []
    thread = threading.Thread(target=serve, args=("127.0.0.1", 0, 30, None, ready, True), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not ready and time.monotonic() < deadline:
        time.sleep(0.01)
    result = send("127.0.0.1", ready[0], seconds)
    thread.join(timeout=30)
    return result


def stop(pidfile):
    try:
        pid = int(open(pidfile).read().split()[0])
    except (OSError, ValueError, IndexError):
        return {"stopped": False, "reason": "no pidfile %s" % pidfile}
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return {"stopped": False, "reason": "process %d is gone" % pid}
    if "gpufleet_socket_bw" not in cmdline or " serve " not in " %s " % cmdline:
        return {"stopped": False, "reason": "process %d is not our receiver: %s" % (pid, cmdline.strip())}
    os.kill(pid, signal.SIGTERM)
    return {"stopped": True, "pid": pid}


def main(argv):
    parser = argparse.ArgumentParser(prog="gpufleet_socket_bw")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("serve")
    p.add_argument("--bind", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pidfile", required=True)
    p.add_argument("--idle-timeout", type=float, default=300)
    p = sub.add_parser("send")
    p.add_argument("--to", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--repeat", type=int, default=1, help="send this many times and report the best figure")
    p = sub.add_parser("loopback")
    p.add_argument("--seconds", type=float, default=2.0)
    p = sub.add_parser("stop")
    p.add_argument("--pidfile", required=True)
    args = parser.parse_args(argv)
    if args.cmd == "serve":
        return serve(args.bind, args.port, args.idle_timeout, args.pidfile)
    if args.cmd == "send":
        # On shared machines one run can be crowded out; the best of a few is the link's capacity.
        samples = []
        for _attempt in range(max(1, args.repeat)):
            try:
                samples.append(send(args.to, args.port, args.seconds))
            except OSError as exc:
                samples.append({"gbps": None, "error": "%s:%s: %s" % (args.to, args.port, exc),
                                "transport": "tcp-socket"})
        measured = [r for r in samples if r.get("gbps") is not None]
        result = dict(max(measured, key=lambda r: r["gbps"]) if measured else samples[-1])
        result["samples_gbps"] = [r.get("gbps") for r in samples]
    elif args.cmd == "loopback":
        result = loopback(args.seconds)
    else:
        result = stop(args.pidfile)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
