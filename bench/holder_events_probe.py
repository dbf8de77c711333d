#!/usr/bin/env python3
"""The processes bench/holder_events.sh makes and times against `gpureap export`.

  latency URL DEVICE RUNS
      Per run: a process opens DEVICE, then forks a child that opens nothing; the time from
      just before the open (the fork) until a scrape of URL counts one more holder of GPU 0.
      Prints the two medians in ms: "OPEN FORK".
  churn URL DEV_DIR SECONDS
      For SECONDS, about 100 processes a second open a GPU's device file, fork a child that
      lives on a while, and exit; URL is scraped every second. Prints what its counters said,
      and whether the holders it keeps at the end are a walk's (`$GPUREAP export --once`).
  overflow URL DEV_DIR EXPORTER_PID OPENERS
      The exporter is stopped (SIGSTOP) while OPENERS processes open GPU 1's device file and
      exit, then 20 open it and stay; it is continued. Prints its counters and whether the
      first scrape after has the 20.

Holders are counted from gpureap_gpu_holders without the NVML clients (the exporters and
watch daemons of the benchmark are NVML clients of every GPU).
"""
import http.client
import os
import random
import signal
import statistics
import subprocess
import sys
import time
import urllib.parse


class Scraper:
    def __init__(self, url):
        parts = urllib.parse.urlparse(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.path = parts.path

    def text(self):
        try:
            self.conn.request("GET", self.path)
            return self.conn.getresponse().read().decode("utf-8", "replace")
        except (http.client.HTTPException, OSError):  # an idle kept-alive connection the server closed
            self.conn.close()
            self.conn.request("GET", self.path)
            return self.conn.getresponse().read().decode("utf-8", "replace")

    @staticmethod
    def holders_in(text, gpu):
        total = 0.0
        for line in text.splitlines():
            if line.startswith("gpureap_gpu_holders{") and f'gpu="{gpu}"' in line and 'role="client"' not in line:
                total += float(line.rsplit(" ", 1)[1])
        return total

    @staticmethod
    def value_in(text, name):
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def holders(self, gpu="0"):
        return self.holders_in(self.text(), gpu)

    def wait_holders(self, count, gpu="0", timeout=30):
        """The monotonic time of the first scrape that counts `count` holders."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.holders(gpu) == count:
                return time.monotonic()
        raise SystemExit(f"bench: GPU {gpu} never had {count} holders within {timeout} s")


def read_line(fd):
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            raise SystemExit("bench: a holder ended early")
        line += chunk
    return line.decode()


def fork_paused():
    """A child that waits, holding what it inherited, until it is killed."""
    child = os.fork()
    if child == 0:
        signal.pause()
        os._exit(0)
    return child


def holder(device, commands, report):
    """Opens `device` (the time just before, reported), then on 'f' forks a child that pauses
    (the time just before the fork, reported), on 'k' ends it, on anything else exits."""
    start = time.monotonic()
    os.open(device, os.O_RDWR)
    os.write(report, f"{start}\n".encode())
    child = 0
    while True:
        command = os.read(commands, 1)
        if command == b"f":
            start = time.monotonic()
            child = fork_paused()
            os.write(report, f"{start}\n".encode())
        elif command == b"k":
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            os.write(report, b"0\n")
        else:
            os._exit(0)


def start_child(body):
    """Forks a child that runs body(commands, report) and exits; returns its PID, the end its
    reports are read from and the end its commands are written to."""
    report_r, report_w = os.pipe()
    command_r, command_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(report_r)
        os.close(command_w)
        body(command_r, report_w)
        os._exit(0)
    os.close(report_w)
    os.close(command_r)
    return pid, report_r, command_w


def latency(url, device, runs):
    scraper = Scraper(url)
    base = scraper.holders()
    opens, forks = [], []
    for _ in range(runs):
        pid, report_r, command_w = start_child(lambda commands, report: holder(device, commands, report))
        opened = float(read_line(report_r))
        opens.append(scraper.wait_holders(base + 1) - opened)
        os.write(command_w, b"f")
        forked = float(read_line(report_r))
        forks.append(scraper.wait_holders(base + 2) - forked)
        os.write(command_w, b"k")
        read_line(report_r)
        os.write(command_w, b"q")
        os.waitpid(pid, 0)
        os.close(report_r)
        os.close(command_w)
        scraper.wait_holders(base)
    print(f"{1000 * statistics.median(opens):.2f} {1000 * statistics.median(forks):.2f}")


def churner(dev_dir, seconds, rate):
    """Starts `rate` holders a second for `seconds`: each opens a random GPU's device file,
    lives 0.1-0.6 s, forks a child that lives 0.1-0.6 s more, and exits."""
    end = time.monotonic() + seconds
    started = 0
    next_start = time.monotonic()
    while time.monotonic() < end:
        now = time.monotonic()
        if now < next_start:
            time.sleep(next_start - now)
        next_start += 1.0 / rate
        if os.fork() == 0:
            os.open(f"{dev_dir}/nvidia{random.randrange(8)}", os.O_RDWR)
            time.sleep(random.uniform(0.1, 0.6))
            if os.fork() == 0:
                time.sleep(random.uniform(0.1, 0.6))
                os._exit(0)
            os._exit(0)
        started += 1
        while True:  # the holders that have ended; their children are init's
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    return started


def counters(text):
    return {name: Scraper.value_in(text, f"gpureap_holder_{name}") for name in ("walks_total", "walk_missed_total", "events_lost_total")}


def churn(url, dev_dir, seconds):
    scraper = Scraper(url)
    rate = 100
    pid = os.fork()
    if pid == 0:
        started = churner(dev_dir, seconds, rate)
        os._exit(0 if started > 0 else 1)
    scrapes = 0
    while os.waitpid(pid, os.WNOHANG)[0] == 0:
        scraper.text()
        scrapes += 1
        time.sleep(1)
    time.sleep(3)  # the last children (0.6 s at most) have ended, on a loaded host too
    text = scraper.text()
    after = counters(text)
    walk = subprocess.run([os.environ.get("GPUREAP", "gpureap"), "export", "--once", "--no-kernel-log"],
                          capture_output=True, text=True, check=True).stdout
    kept = [Scraper.holders_in(text, str(g)) for g in range(8)]
    walked = [Scraper.holders_in(walk, str(g)) for g in range(8)]
    print(f"churn: {seconds} s at {rate} holders a second (each an open, a fork, two exits), scraped {scrapes} times")
    print(f"  reconciliations {after['walks_total']:.0f}, holders they found that the events had missed "
          f"{after['walk_missed_total']:.0f}, events lost {after['events_lost_total']:.0f}")
    print(f"  at the end, holders per GPU kept from events {kept} and from a walk {walked}: "
          f"{'equal' if kept == walked else 'DIFFERENT'}")


def overflow(url, dev_dir, exporter_pid, openers):
    """With the exporter stopped (SIGSTOP), `openers` processes open GPU 1's device file and
    exit, more than its fanotify queue holds, and then 20 more open it and stay: their opens
    are dropped with the queue's overflow, so only a walk can find them."""
    scraper = Scraper(url)
    base = scraper.holders("1")
    before = counters(scraper.text())
    device = f"{dev_dir}/nvidia1"
    os.kill(exporter_pid, signal.SIGSTOP)
    try:
        for _ in range(openers):
            child = os.fork()
            if child == 0:
                os.open(device, os.O_RDWR)
                os._exit(0)
            os.waitpid(child, 0)
        stayers = []
        for _ in range(20):
            pid, report, _ = start_child(lambda commands, report: (os.open(device, os.O_RDWR), os.write(report, b"open\n"),
                                                                    os.read(commands, 1)))
            read_line(report)
            stayers.append(pid)
    finally:
        os.kill(exporter_pid, signal.SIGCONT)
    text = scraper.text()
    seen, later = Scraper.holders_in(text, "1") - base, counters(text)
    print(f"overflow: the exporter stopped while {openers} processes opened GPU 1's device file and exited "
          f"(its fanotify queue holds fewer), then 20 more opened it and stayed")
    print(f"  events lost {before['events_lost_total']:.0f} -> {later['events_lost_total']:.0f}, reconciliations "
          f"{before['walks_total']:.0f} -> {later['walks_total']:.0f}; the first scrape after counts {seen:.0f} of "
          f"the 20 ({'recovered' if seen == 20 else 'NOT recovered'})")
    for pid in stayers:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "latency" and len(sys.argv) == 5:
        latency(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif mode == "churn" and len(sys.argv) == 5:
        churn(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif mode == "overflow" and len(sys.argv) == 6:
        overflow(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
