// `gpureap export` against real processes on simulated GPUs: the figures a known workload
// gives, promtool on real output, hostile command lines read back by Prometheus's parser,
// the contract of docs/metrics.md, shared collections, TLS and basic auth, a hung driver,
// lost GPUs, Xid counters, where it listens, and its errors.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "export_support.hpp"
#include "metrics/text_format.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

std::string me() { return getpwuid(geteuid())->pw_name; }

bool alive(pid_t pid) { return kill(pid, 0) == 0; }

TEST(Export, TheFiguresOfAKnownWorkload) {
  SimHost host({"--gpus", "2", "--memory", "80GiB"});
  auto job = host.start({"--alloc", "0:4GiB", "--workers", "2"});
  auto small = host.start({"--alloc", "1:1536MiB"});
  auto monitor = host.start({"--nvml-client"});
  // A job killed while its forked worker keeps its 2 GiB: the driver still lists the dead PID.
  auto dead = host.start({"--alloc", "1:2GiB", "--workers", "1"});
  ASSERT_EQ(kill(dead.pid, SIGKILL), 0);
  dead.wait_exit();
  host.ctl({"set", "--gpu", "1", "base_used=256MiB"});  // memory no process explains

  const auto result = host.gpureap({"export", "--once", "--per-process", "--no-kernel-log"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const Scrape m = parse_exposition(result.out);
  const std::map<std::string, std::string> gpu0{{"gpu", "0"}}, gpu1{{"gpu", "1"}};
  EXPECT_EQ(m.value("gpureap_driver_up"), 1);
  EXPECT_EQ(m.value("gpureap_driver_info", {{"driver_version", "550.54.15"}}), 1);
  EXPECT_EQ(m.value("gpureap_gpu_info", {{"gpu", "1"}, {"name", "NVIDIA H100 80GB HBM3"}, {"pci_bus_id", "00000000:2A:00.0"}}), 1);
  EXPECT_EQ(m.value("gpureap_gpu_memory_total_bytes", gpu0), 80 * GiB);
  EXPECT_EQ(m.value("gpureap_gpu_memory_reserved_bytes", gpu0), 512 * MiB);
  EXPECT_EQ(m.value("gpureap_gpu_memory_used_bytes", gpu0), 4 * GiB);
  EXPECT_EQ(m.value("gpureap_gpu_memory_used_bytes", gpu1), 1536 * MiB + 2 * GiB + 256 * MiB);
  EXPECT_EQ(m.value("gpureap_gpu_memory_free_bytes", gpu0), 80 * GiB - 512 * MiB - 4 * GiB);
  EXPECT_EQ(m.value("gpureap_gpu_memory_unattributed_bytes", gpu0), 0);
  EXPECT_EQ(m.value("gpureap_gpu_memory_unattributed_bytes", gpu1), 256 * MiB);
  EXPECT_EQ(m.value("gpureap_gpu_processes", gpu0), 1);
  EXPECT_EQ(m.value("gpureap_gpu_processes", gpu1), 2) << "the dead PID is still listed";
  EXPECT_EQ(m.value("gpureap_gpu_holders", {{"gpu", "0"}, {"role", "gpu-process"}}), 1);
  EXPECT_EQ(m.value("gpureap_gpu_holders", {{"gpu", "0"}, {"role", "worker"}}), 2);
  EXPECT_EQ(m.value("gpureap_gpu_holders", {{"gpu", "0"}, {"role", "client"}}), 1) << "the monitor";
  EXPECT_EQ(m.value("gpureap_gpu_holders", {{"gpu", "1"}, {"role", "orphan"}}), 1);
  EXPECT_EQ(m.value("gpureap_gpu_holders", {{"gpu", "1"}, {"role", "unlisted"}}), 0);
  EXPECT_EQ(m.value("gpureap_gpu_orphaned_holders", gpu0), 0);
  EXPECT_EQ(m.value("gpureap_gpu_orphaned_holders", gpu1), 1);
  EXPECT_EQ(m.value("gpureap_gpu_orphaned_memory_bytes", gpu1), 2 * GiB);
  EXPECT_EQ(m.value("gpureap_gpu_lost", gpu1), 0);
  EXPECT_EQ(m.value("gpureap_user_gpu_memory_bytes", {{"gpu", "0"}, {"user", me()}}), 4 * GiB);
  EXPECT_EQ(m.value("gpureap_user_gpu_memory_bytes", {{"gpu", "1"}, {"user", me()}}), 1536 * MiB + 2 * GiB)
      << "the dead PID's memory counts for its worker's user";
  EXPECT_EQ(m.value("gpureap_process_gpu_memory_bytes",
                    {{"gpu", "0"}, {"pid", std::to_string(job.pid)}, {"user", me()}, {"container", ""}}),
            4 * GiB);
  const auto& process = m.all("gpureap_process_gpu_memory_bytes");
  ASSERT_EQ(process.size(), 3u);
  for (const auto* p : process) {
    if (p->labels.at("pid") == std::to_string(job.pid)) {
      EXPECT_NE(p->labels.at("command").find("gpusim-cuda --alloc 0:4GiB --workers 2"), std::string::npos);
    }
    if (p->labels.at("pid") == std::to_string(dead.pid)) {
      EXPECT_EQ(p->labels.at("command"), "") << "it has exited";
    }
  }
  EXPECT_EQ(m.value("gpureap_doctor_finding", {{"id", "orphaned-holders"}, {"severity", "warning"}, {"gpu", "1"}}), 1);
  EXPECT_EQ(m.value("gpureap_collection_errors_total", {{"source", "nvml"}}), 0);
  // Looking is all it does: every process is still there, the orphan included.
  for (pid_t pid : {job.pid, job.workers[0], job.workers[1], small.pid, monitor.pid, dead.workers[0]}) {
    EXPECT_TRUE(alive(pid)) << pid;
  }
}

TEST(Export, PromtoolAcceptsTheOutputAndReadsHostileCommandLinesBack) {
  SimHost host;
  // A process names itself with a quote, a backslash, a newline, an escape and a byte that is
  // not UTF-8: its command label must reach Prometheus inert and intact.
  const std::string name = "evil \"q\" back\\slash\nnext \x1b[2J \xff";
  auto hostile = host.start({"--alloc", "0:1GiB", "--name", name});
  const auto result = host.gpureap({"export", "--once", "--per-process", "--no-kernel-log"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(promtool_check(result.out, host.state_dir()), "");

  const auto samples = parsed_by_prometheus(result.out, host.state_dir());
  const ScrapedSample* series = nullptr;
  for (const auto& s : samples) {
    if (s.name == "gpureap_process_gpu_memory_bytes" && s.labels.at("pid") == std::to_string(hostile.pid)) series = &s;
  }
  ASSERT_NE(series, nullptr) << result.out;
  // The terminal's sanitiser's form: \\ for a backslash, \xHH for the rest; quotes kept.
  const std::string shown = "evil \"q\" back\\\\slash\\x0anext \\x1b[2J \\xff";
  EXPECT_EQ(series->labels.at("command"), shown + " --alloc 0:1GiB --name " + shown);
  EXPECT_EQ(series->value, 1.0 * GiB);

  // The writer's own escaping, with raw quotes, backslashes and newlines, read back the same.
  MetricSet set;
  const std::string raw = "line one\nline \"two\" C:\\dir\\ 学习";
  set.family("gpureap_test_label", MetricType::Gauge, "Raw text.\nSecond help line \\.").add({{"text", raw}}, 2);
  const std::string text = render_text_format(set);
  EXPECT_EQ(promtool_check(text, host.state_dir()), "");
  const auto back = parsed_by_prometheus(text, host.state_dir());
  ASSERT_FALSE(back.empty());
  bool found = false;
  for (const auto& s : back) found = found || (s.name == "gpureap_test_label" && s.labels.at("text") == raw);
  EXPECT_TRUE(found);
}

TEST(Export, EveryFamilyOfTheContractIsServedWithItsLabelsAndNothingElse) {
  SimHost host({"--gpus", "2"});
  auto job = host.start({"--alloc", "0:1GiB"});
  const std::string log = host.state_dir() + "/kern.log";
  std::ofstream(log) << "2026-11-29T18:28:39+0000 node kernel: NVRM: Xid (PCI:0000:17:00): 13, pid=1, Graphics Exception\n";
  ExportServer server(host, {"--per-process", "--kernel-log", log});
  ASSERT_TRUE(server.serving()) << server.stderr_text();
  const Scrape m = server.scrape();
  const auto contract = metrics_contract();
  ASSERT_GT(contract.size(), 30u) << "docs/metrics.md was not read";
  for (const auto& [name, family] : contract) {
    if (name.rfind("gpureap_watch_", 0) == 0) continue;  // watch's own
    ASSERT_TRUE(m.types.count(name)) << name << " is in docs/metrics.md but not served";
    EXPECT_EQ(family.type.substr(0, m.types.at(name).size()), m.types.at(name)) << name;
    std::set<std::string> want(family.labels.begin(), family.labels.end());
    for (const auto* sample : m.all(name)) {
      std::set<std::string> got;
      for (const auto& [label, value] : sample->labels) got.insert(label);
      EXPECT_EQ(got, want) << name;
    }
  }
  for (const auto& [name, type] : m.types) EXPECT_TRUE(contract.count(name)) << name << " is served but not in docs/metrics.md";
  EXPECT_EQ(server.stop(), 0) << server.stderr_text();
}

TEST(Export, AHundredConcurrentScrapesShareTheCollection) {
  SimHost host({"--gpus", "2"});
  auto job = host.start({"--alloc", "0:1GiB", "--workers", "2"});
  ExportServer server(host, {"--cache", "10s", "--no-kernel-log"});
  ASSERT_TRUE(server.serving()) << server.stderr_text();
  std::promise<void> go;
  std::shared_future<void> start = go.get_future().share();
  std::vector<std::future<std::pair<int, std::string>>> scrapes;
  for (int i = 0; i < 100; ++i) {
    scrapes.push_back(std::async(std::launch::async, [&, start] {
      auto client = server.client();
      start.wait();
      const auto r = client.Get("/metrics");
      return r ? std::pair{r->status, r->body} : std::pair{-1, httplib::to_string(r.error())};
    }));
  }
  go.set_value();
  int served = 0, refused = 0;
  for (auto& s : scrapes) {
    const auto [status, body] = s.get();
    if (status == 200) {
      ++served;
      EXPECT_NE(body.find("gpureap_gpu_memory_used_bytes{gpu=\"0\""), std::string::npos);
    } else {
      EXPECT_EQ(status, 503) << body;  // beyond --max-scrapes, answered at once
      ++refused;
    }
  }
  EXPECT_EQ(served + refused, 100);
  EXPECT_GE(served, 10);
  const Scrape after = server.scrape();
  EXPECT_LE(after.value("gpureap_collections_total"), 2) << "one collection (two at most: the first one at start "
                                                            "and one the scrapes shared)";
  EXPECT_EQ(after.value("gpureap_scrapes_rejected_total", {{"reason", "too-many"}}), refused);
  EXPECT_EQ(server.stop(), 0);
}

TEST(Export, TlsAndBasicAuthFromAWebConfigFile) {
  SimHost host;
  const std::string dir = host.config_dir();
  ASSERT_FALSE(write_tls_web_config(dir, "prometheus", "scrape me").empty());
  ExportServer server(host, {"--web-config", dir + "/web.yml", "--no-kernel-log"});
  ASSERT_TRUE(server.serving()) << server.stderr_text();
  EXPECT_NE(server.stderr_text().find("serving https://127.0.0.1:"), std::string::npos);

  httplib::SSLClient tls("127.0.0.1", server.port());
  tls.set_ca_cert_path((dir + "/tls.crt").c_str());
  tls.enable_server_certificate_verification(true);
  auto r = tls.Get("/metrics");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 401) << "no password";
  EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Basic realm=\"gpureap\", charset=\"UTF-8\"");
  tls.set_basic_auth("prometheus", "scrape you");
  r = tls.Get("/metrics");
  ASSERT_TRUE(r) << httplib::to_string(r.error()) << "\n" << server.stderr_text();
  EXPECT_EQ(r->status, 401) << "a wrong password";
  tls.set_basic_auth("prometheus", "scrape me");
  r = tls.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const Scrape m = parse_exposition(r->body);
  EXPECT_EQ(m.value("gpureap_scrapes_rejected_total", {{"reason", "unauthorized"}}), 2);
  EXPECT_EQ(m.value("gpureap_gpu_memory_total_bytes", {{"gpu", "0"}}), 80 * GiB);
  // Plain HTTP to the TLS port gets no metrics.
  auto plain = server.client();
  plain.set_basic_auth("prometheus", "scrape me");
  const auto clear = plain.Get("/metrics");
  EXPECT_TRUE(!clear || clear->status != 200);
  EXPECT_EQ(server.stop(), 0) << server.stderr_text();
}

TEST(Export, TheScrapeTimeoutHoldsWhenTheDriverHangs) {
  SimHost host({"--gpus", "2"});
  auto job = host.start({"--alloc", "0:3GiB"});
  ExportServer server(host, {"--cache", "0", "--no-kernel-log"});
  ASSERT_TRUE(server.serving()) << server.stderr_text();
  EXPECT_EQ(server.scrape().value("gpureap_collection_stale"), 0);
  // From now on every collection blocks in the driver for 60 s.
  host.ctl({"fault", "--call", "nvmlDeviceGetMemoryInfo", "--code", "10", "--hang-ms", "60000"});
  const auto asked = std::chrono::steady_clock::now();
  const Scrape late = server.scrape({{"X-Prometheus-Scrape-Timeout-Seconds", "2"}});
  const auto took = std::chrono::steady_clock::now() - asked;
  EXPECT_LT(took, std::chrono::seconds(2)) << "answered within the timeout Prometheus sent";
  EXPECT_EQ(late.value("gpureap_collection_stale"), 1);
  EXPECT_EQ(late.value("gpureap_gpu_memory_used_bytes", {{"gpu", "0"}}), 3 * GiB) << "the last good collection";
  auto client = server.client();
  const auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  // SIGTERM still ends it at once, leaving the call that never returns.
  const auto stopping = std::chrono::steady_clock::now();
  EXPECT_EQ(server.stop(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(5));
  EXPECT_NE(server.stderr_text().find("a collection is still waiting on the driver"), std::string::npos);
  EXPECT_TRUE(alive(job.pid));
}

TEST(Export, ALostGpuAndDriverErrorsAreReportedAndTheOtherGpuStillServed) {
  SimHost host({"--gpus", "2"});
  auto job = host.start({"--alloc", "0:2GiB"});
  ExportServer server(host, {"--cache", "0", "--no-kernel-log"});
  ASSERT_TRUE(server.serving()) << server.stderr_text();
  EXPECT_EQ(server.scrape().value("gpureap_gpu_lost", {{"gpu", "1"}}), 0);  // the collection begun at start is over
  host.ctl({"set", "--gpu", "1", "lost=1"});
  host.ctl({"fault", "--call", "nvmlDeviceGetComputeRunningProcesses*", "--code", "4", "--gpu", "0"});
  Scrape m = server.scrape();
  EXPECT_EQ(m.value("gpureap_gpu_lost", {{"gpu", "1"}}), 1);
  EXPECT_EQ(m.value("gpureap_gpu_lost", {{"gpu", "0"}}), 0);
  EXPECT_FALSE(m.value("gpureap_gpu_memory_used_bytes", {{"gpu", "1"}})) << "nothing a lost GPU says is believed";
  EXPECT_EQ(m.value("gpureap_gpu_memory_used_bytes", {{"gpu", "0"}}), 2 * GiB);
  EXPECT_FALSE(m.value("gpureap_gpu_processes", {{"gpu", "0"}})) << "a process list that failed is not a count";
  EXPECT_EQ(m.value("gpureap_doctor_finding", {{"id", "gpu-lost"}, {"severity", "critical"}, {"gpu", "1"}}), 1);
  EXPECT_GE(m.value("gpureap_collection_errors_total", {{"source", "nvml"}}), 1);
  host.ctl({"set", "--gpu", "1", "lost=0"});
  host.ctl({"fault", "--clear"});
  m = server.scrape();
  EXPECT_EQ(m.value("gpureap_gpu_lost", {{"gpu", "1"}}), 0);
  EXPECT_EQ(m.value("gpureap_gpu_processes", {{"gpu", "0"}}), 1);
  EXPECT_EQ(server.stop(), 0);
  const std::string err = server.stderr_text();
  EXPECT_NE(err.find("GPU 0: its process list could not be read"), std::string::npos) << err;
}

TEST(Export, XidEventsAreCountedOnceAsTheKernelLogGrows) {
  SimHost host({"--gpus", "2"});
  const std::string log = host.state_dir() + "/kern.log";
  std::ofstream(log) << "2026-11-29T18:28:39+0000 node kernel: NVRM: Xid (PCI:0000:17:00): 79, pid=1173, GPU has "
                        "fallen off the bus.\n"
                        "2026-11-29T18:28:41+0000 node kernel: NVRM: Xid (PCI:0000:99:00): 31, pid=7, MMU Fault\n";
  ExportServer server(host, {"--cache", "0", "--kernel-log", log});
  ASSERT_TRUE(server.serving()) << server.stderr_text();
  Scrape m = server.scrape();
  EXPECT_EQ(m.value("gpureap_xid_events_total", {{"gpu", "0"}, {"xid", "79"}}), 1) << "GPU 0 sits at 0000:17:00";
  EXPECT_EQ(m.value("gpureap_xid_events_total", {{"gpu", "0000:99:00"}, {"xid", "31"}}), 1) << "no GPU there now";
  EXPECT_EQ(m.value("gpureap_xid_last_event_timestamp_seconds", {{"gpu", "0"}, {"xid", "79"}}), 1795976919);
  {
    std::ofstream append(log, std::ios::app);
    append << "2026-11-29T18:30:00+0000 node kernel: NVRM: Xid (PCI:0000:17:00): 79, pid=1173, GPU has fallen off "
              "the bus.\n"
              "2026-11-29T18:31:00+0000 node kernel: NVRM: Xid (PCI:0000:17:00): 79, pid=1173, GPU ha";  // being written
  }
  m = server.scrape();
  EXPECT_EQ(m.value("gpureap_xid_events_total", {{"gpu", "0"}, {"xid", "79"}}), 2) << "the history is not counted again";
  EXPECT_EQ(m.value("gpureap_xid_last_event_timestamp_seconds", {{"gpu", "0"}, {"xid", "79"}}), 1795977000);
  { std::ofstream(log, std::ios::app) << "s fallen off the bus.\n"; }
  m = server.scrape();
  EXPECT_EQ(m.value("gpureap_xid_events_total", {{"gpu", "0"}, {"xid", "79"}}), 3) << "the line once it was whole";
  EXPECT_EQ(m.value("gpureap_collection_errors_total", {{"source", "kernel-log"}}), 0);
  EXPECT_EQ(server.stop(), 0);
}

// A non-loopback IPv4 address of this host, "" when it has none.
std::string outside_address() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  std::string found;
  for (ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) found = text;
  }
  freeifaddrs(list);
  return found;
}

TEST(Export, ListensOnLoopbackUnlessToldOtherwise) {
  SimHost host;
  {
    // No --listen: 127.0.0.1:9874 (or, when something else holds that port, a refusal naming it).
    ExportServer standard(host, {"--no-kernel-log"}, /*add_listen=*/false);
    if (standard.serving()) {
      EXPECT_EQ(standard.address(), "127.0.0.1");
      EXPECT_EQ(standard.port(), 9874);
      EXPECT_EQ(standard.stop(), 0);
    } else {
      EXPECT_NE(standard.stderr_text().find("cannot serve on 127.0.0.1:9874"), std::string::npos)
          << standard.stderr_text();
    }
  }
  {
    ExportServer v6(host, {"--no-kernel-log", "--listen", "[::1]:0"});
    if (v6.serving()) {
      EXPECT_EQ(v6.address(), "[::1]");
      const auto r = v6.client().Get("/healthz");
      ASSERT_TRUE(r) << httplib::to_string(r.error());
      EXPECT_EQ(r->status, 200);
    } else {  // a host without IPv6: said in one line, status 12
      EXPECT_NE(v6.stderr_text().find("cannot serve on [::1]:0"), std::string::npos) << v6.stderr_text();
    }
  }
  const std::string outside = outside_address();
  if (outside.empty()) GTEST_SKIP() << "this host has no address but loopback to try from";
  ExportServer local(host, {"--no-kernel-log"});
  ASSERT_TRUE(local.serving()) << local.stderr_text();
  httplib::Client from_outside(outside, local.port());
  from_outside.set_connection_timeout(2, 0);
  EXPECT_FALSE(from_outside.Get("/healthz")) << "not reachable on " << outside;
  ExportServer everywhere(host, {"--no-kernel-log", "--per-process", "--listen", "0.0.0.0:0"});
  ASSERT_TRUE(everywhere.serving()) << everywhere.stderr_text();
  httplib::Client reach(outside, everywhere.port());
  const auto r = reach.Get("/healthz");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(everywhere.stderr_text().find("beyond this host, without authentication (--per-process shows users and "
                                          "command lines)"),
            std::string::npos)
      << everywhere.stderr_text();
  EXPECT_EQ(local.stderr_text().find("without authentication"), std::string::npos);
}

TEST(Export, BadInputIsOneLineAndADocumentedStatus) {
  SimHost host;
  const std::string dir = host.config_dir();
  std::ofstream(dir + "/typo.yml") << "basic_auth_user:\n  alice: x\n";
  std::ofstream(dir + "/tls.crt") << "not a certificate\n";
  std::ofstream(dir + "/tls.key") << "not a key\n";
  std::ofstream(dir + "/badtls.yml") << "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n";
  const std::vector<std::pair<std::vector<std::string>, std::string>> usage = {
      {{"--listen", "nowhere"}, "--listen nowhere: give HOST:PORT"},
      {{"--listen", ""}, "--listen was given an empty value"},
      {{"--web-config", dir + "/typo.yml"}, dir + "/typo.yml:1:1: unknown key basic_auth_user"},
      {{"--web-config", dir + "/absent.yml"}, "cannot open it"},
      {{"--max-scrapes", "0"}, "--max-scrapes 0"},
      {{"--max-scrapes", "1e9"}, "--max-scrapes"},
      {{"--cache", "nan"}, "--cache nan"},
      {{"--kernel-log", "/dev/zero"}, "not a saved kernel log"},
      {{"--kernel-log", dir + "/k", "--no-kernel-log"}, "contradict"},
      {{"--once", "--listen", "127.0.0.1:0"}, "--once prints one collection"},
      {{"--frobnicate"}, "--frobnicate"},
  };
  for (const auto& [args, message] : usage) {
    std::vector<std::string> argv = {"export"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto result = host.gpureap(argv);
    EXPECT_EQ(result.exit_code, 2) << args[0] << ": " << result.err;
    EXPECT_NE(result.err.find(message), std::string::npos) << result.err;
    EXPECT_EQ(result.err.rfind("gpureap export: ", 0), 0u) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
  // Cannot serve: the port taken, TLS files the library refuses.
  ExportServer first(host, {"--no-kernel-log"});
  ASSERT_TRUE(first.serving());
  auto taken = host.gpureap({"export", "--no-kernel-log", "--listen", "127.0.0.1:" + std::to_string(first.port())});
  EXPECT_EQ(taken.exit_code, 12);
  EXPECT_NE(taken.err.find("cannot serve on 127.0.0.1:" + std::to_string(first.port()) + ": Address already in use"),
            std::string::npos)
      << taken.err;
  auto refused = host.gpureap({"export", "--no-kernel-log", "--listen", "127.0.0.1:0", "--web-config", dir + "/badtls.yml"});
  EXPECT_EQ(refused.exit_code, 12);
  EXPECT_NE(refused.err.find("the TLS certificate or key was refused"), std::string::npos) << refused.err;
  EXPECT_EQ(first.stop(), 0);
}

}  // namespace
}  // namespace gpureap::test
