// `gpureap watch --listen`: the daemon serves /metrics from its own looks (the snapshot
// families of its last full scan and its gpureap_watch_* counters), scraped over HTTP while it
// acts on real processes; a notification command it spawns while serving holds no socket.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <thread>
#include <set>
#include <sstream>

#include <httplib.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "export_support.hpp"
#include "fake_prometheus.hpp"
#include "kill_support.hpp"
#include "sim_harness.hpp"
#include "watch_support.hpp"

namespace gpureap::test {
namespace {

std::string idle_terminate_rule() {
  return "[[rule]]\nname = \"idle\"\ncondition = \"idle\"\nidle_for = \"300ms\"\naction = \"terminate\"\ngrace = \"0s\"\n";
}

// The port from "gpureap watch: serving http://127.0.0.1:PORT/metrics".
int serving_port(BackgroundWatch& watch) {
  const auto line = watch.wait_for_text("serving http://127.0.0.1:");
  if (!line) return 0;
  const auto at = line->raw.find("127.0.0.1:") + 10;
  return std::stoi(line->raw.substr(at));
}

struct Scraped {
  std::string body;
  Scrape parsed;
};

Scraped scrape(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5, 0);
  const auto response = client.Get("/metrics");
  if (!response) {
    ADD_FAILURE() << "GET /metrics failed: " << httplib::to_string(response.error());
    return {};
  }
  EXPECT_EQ(response->status, 200) << response->body;
  return {response->body, parse_exposition(response->body)};
}

// Scrapes until `ready` holds for what it got (a counter moves within an interval or two).
Scraped scrape_until(int port, const std::function<bool(const Scrape&)>& ready) {
  Scraped last;
  eventually([&] {
    last = scrape(port);
    return ready(last.parsed);
  });
  return last;
}

TEST(WatchListen, ServesHostAndCounterFamiliesThatPromtoolAcceptsAndSurvivesSighup) {
  SimHost host;
  auto idle = host.start({"--alloc", "0:1GiB"});
  const Service service(host);
  // The notification command lists the descriptors it was started with (ls's own: the
  // directory it reads is one more, under /proc).
  const std::string script =
      write_file(host, "fds.sh", "#!/bin/sh\nexec ls -l /proc/self/fd/ > '" + host.config_dir() + "/fds.txt'\n");
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  const std::string policy = write_file(host, "policy.toml",
                                        std::string(kFast) + "[notify]\ncommand = [\"" + script + "\"]\n" +
                                            idle_terminate_rule());
  const std::string kernel_log = write_file(
      host, "kern.log", "2026-11-29T18:28:39+0000 node kernel: NVRM: Xid (PCI:0000:17:00): 79, pid=1173, GPU has fallen off the bus.\n");
  BackgroundWatch watch(host, policy, {"--listen", "127.0.0.1:0", "--kernel-log", kernel_log});
  const int port = serving_port(watch);
  ASSERT_GT(port, 0);
  // Held open while the notification runs: an accepted socket as well as the listening one.
  httplib::Client keep_alive("127.0.0.1", port);
  keep_alive.set_keep_alive(true);
  ASSERT_TRUE(keep_alive.Get("/healthz"));

  const auto would = watch.wait_for("would-terminate", {{"pid", std::to_string(idle.pid)}});
  ASSERT_TRUE(would);
  const Scraped got = scrape_until(port, [](const Scrape& s) {
    return s.value("gpureap_watch_notifications_total", {{"channel", "command"}, {"outcome", "sent"}}).value_or(0) >= 2;
  });
  const Scrape& s = got.parsed;
  EXPECT_GE(s.value("gpureap_watch_policy_matches_total", {{"rule", "idle"}, {"action", "terminate"}}).value_or(0), 1);
  EXPECT_EQ(s.value("gpureap_watch_terminations_total", {{"reason", "idle"}, {"outcome", "dry-run"}}), 1);
  for (const char* outcome : {"exited", "killed", "survived", "refused"}) {
    EXPECT_EQ(s.value("gpureap_watch_terminations_total", {{"reason", "idle"}, {"outcome", outcome}}), 0) << outcome;
  }
  EXPECT_EQ(s.value("gpureap_watch_memory_freed_bytes_total"), 0);
  EXPECT_EQ(s.value("gpureap_watch_terminations_capped_total"), 0);
  // The snapshot's families, as export serves them, and the exporter's own.
  EXPECT_EQ(s.value("gpureap_gpu_memory_used_bytes", {{"gpu", "0"}}), 1.0 * GiB);
  EXPECT_EQ(s.value("gpureap_driver_up"), 1);
  EXPECT_EQ(s.value("gpureap_user_gpu_memory_bytes", {{"user", "root"}}), 1.0 * GiB);
  EXPECT_TRUE(s.value("gpureap_collections_total"));
  EXPECT_TRUE(s.all("gpureap_process_gpu_memory_bytes").empty()) << "per-process series only with --per-process";
  // doctor's quick findings of the last full scan (the service holds GPU 0's file unlisted),
  // and the Xid counters, as export serves them.
  EXPECT_EQ(s.value("gpureap_doctor_finding", {{"id", "unlisted-holders"}, {"severity", "info"}, {"gpu", "0"}}), 1);
  EXPECT_EQ(s.value("gpureap_xid_events_total", {{"gpu", "0"}, {"xid", "79"}}), 1) << "GPU 0 sits at 0000:17:00";
  EXPECT_EQ(s.value("gpureap_collection_errors_total", {{"source", "kernel-log"}}), 0);
  EXPECT_EQ(promtool_check(got.body, host.state_dir()), "");
  // Every family served is docs/metrics.md's, with its type and labels.
  const auto contract = metrics_contract();
  for (const auto& [name, type] : s.types) {
    const auto it = contract.find(name);
    ASSERT_NE(it, contract.end()) << name << " is served but not in docs/metrics.md";
    EXPECT_EQ(it->second.type.substr(0, type.size()), type) << name;
    const std::set<std::string> want(it->second.labels.begin(), it->second.labels.end());
    for (const auto* sample : s.all(name)) {
      std::set<std::string> labels;
      for (const auto& [label, value] : sample->labels) labels.insert(label);
      EXPECT_EQ(labels, want) << name;
    }
  }

  // The notification command inherited stdin, stdout, stderr and nothing of the server's.
  std::ifstream fds(host.config_dir() + "/fds.txt");
  ASSERT_TRUE(fds) << "the notification command did not run";
  std::set<int> seen;
  for (std::string line; std::getline(fds, line);) {
    // "lr-x------ 1 root root 64 Dec  7 13:00 3 -> /dev/null": the descriptor, then its target.
    const auto arrow = line.find(" -> ");
    if (arrow == std::string::npos || arrow == 0) continue;
    const auto space = line.rfind(' ', arrow - 1);
    const std::string number = line.substr(space + 1, arrow - space - 1);
    const std::string target = line.substr(arrow + 4);
    if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) continue;
    EXPECT_EQ(target.find("socket:"), std::string::npos) << "inherited: " << line;
    // A script is run from its descriptor, which its interpreter opens as /dev/fd/N: that one,
    // naming the script itself, is the only other it may hold.
    if (target == script) continue;
    if (target.rfind("/proc/", 0) != 0) seen.insert(std::stoi(number));
  }
  EXPECT_EQ(seen, (std::set<int>{0, 1, 2}));

  // The log is read as it grows, at every look.
  std::ofstream(kernel_log, std::ios::app)
      << "2026-11-29T18:30:00+0000 node kernel: NVRM: Xid (PCI:0000:17:00): 79, pid=1173, GPU has fallen off the bus.\n";
  EXPECT_EQ(scrape_until(port, [](const Scrape& m) {
              return m.value("gpureap_xid_events_total", {{"gpu", "0"}, {"xid", "79"}}) == 2;
            }).parsed.value("gpureap_xid_last_event_timestamp_seconds", {{"gpu", "0"}, {"xid", "79"}}),
            1795977000);

  watch.signal(SIGHUP);
  ASSERT_TRUE(watch.wait_for("reload"));
  EXPECT_TRUE(scrape(port).parsed.value("gpureap_watch_terminations_total", {{"reason", "idle"}, {"outcome", "dry-run"}}))
      << "still serving after a reload";
  EXPECT_EQ(watch.stop(), 0);
  EXPECT_FALSE(httplib::Client("127.0.0.1", port).Get("/healthz")) << "the port is closed after the stop";
  EXPECT_TRUE(running(idle.pid));
  EXPECT_TRUE(running(service.pid));
}

TEST(WatchListen, CountsATerminationInEnforceAndSparesBystanders) {
  SimHost host;
  const Service service(host);                                                    // PPID 1, holds GPU 0's file
  auto working = host.start({"--alloc", "0:1GiB", "--workers", "1", "--sm-util", "40"});  // a running job
  auto idle = host.start({"--alloc", "0:2GiB"});
  const std::string policy =
      write_file(host, "policy.toml",
                 std::string("mode = \"enforce\"\n") + kFast + "audit_log = \"" + host.state_dir() + "/audit.log\"\n" +
                     "[terminate]\nkill_timeout = \"2s\"\nverify_timeout = \"5s\"\n" + idle_terminate_rule());
  BackgroundWatch watch(host, policy, {"--listen", "127.0.0.1:0", "--per-process"});
  const int port = serving_port(watch);
  ASSERT_GT(port, 0);
  ASSERT_TRUE(watch.wait_for("terminate", {{"pid", std::to_string(idle.pid)}}));
  // A look after the ladder's report: the ladder runs beside the looks, so one of them may see
  // the memory back before the ladder has said what it did.
  const Scrape s = scrape_until(port, [](const Scrape& look) {
                     return look.value("gpureap_gpu_memory_used_bytes", {{"gpu", "0"}}) == 1.0 * GiB &&
                            look.value("gpureap_watch_terminations_total", {{"reason", "idle"}, {"outcome", "exited"}}) == 1;
                   }).parsed;
  EXPECT_EQ(s.value("gpureap_watch_terminations_total", {{"reason", "idle"}, {"outcome", "exited"}}), 1);
  EXPECT_EQ(s.value("gpureap_watch_memory_freed_bytes_total"), 2.0 * GiB);
  EXPECT_EQ(s.value("gpureap_process_gpu_memory_bytes", {{"pid", std::to_string(working.pid)}}), 1.0 * GiB);
  EXPECT_FALSE(s.value("gpureap_process_gpu_memory_bytes", {{"pid", std::to_string(idle.pid)}}));
  EXPECT_EQ(watch.stop(SIGINT), 0);
  for (pid_t pid : {service.pid, working.pid, working.workers[0]}) EXPECT_TRUE(running(pid)) << pid;
}

// An https webhook (a company's, signed by its own CA): untrusted, each delivery fails, is logged
// and counted, and the looks go on; after a reload naming the CA in webhook_ca_file, the event
// arrives. A URL with a password is refused when the policy is checked, without echoing it.
TEST(WatchListen, AnHttpsWebhookIsSentOnlyToAServerItsCaFileTrusts) {
  SimHost host;
  auto old = host.start({"--alloc", "0:1GiB"});
  const TlsFiles tls = make_self_signed_certificate(host.config_dir());  // a CA file root may trust
  httplib::SSLServer server(tls.certificate.c_str(), tls.key.c_str());
  std::mutex mutex;
  std::vector<std::string> bodies;
  server.Post("/hook", [&](const httplib::Request& request, httplib::Response& response) {
    const std::lock_guard lock(mutex);
    bodies.push_back(request.body);
    response.status = 204;
  });
  const int hook_port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(hook_port, 0);
  std::thread listener([&] { server.listen_after_bind(); });
  const std::string webhook =
      "[notify]\nwebhook = \"https://127.0.0.1:" + std::to_string(hook_port) + "/hook?team=gpu\"\nwebhook_timeout = \"2s\"\n";
  const std::string rule = "[[rule]]\nname = \"old\"\ncondition = \"over-age\"\nolder_than = \"100ms\"\naction = \"notify\"\n";
  const std::string policy = write_file(host, "policy.toml", std::string(kFast) + webhook + rule);
  {
    BackgroundWatch watch(host, policy, {"--listen", "127.0.0.1:0"});
    const int port = serving_port(watch);
    ASSERT_GT(port, 0);
    const auto failed = watch.wait_for("notification", {{"channel", "webhook"}, {"pid", std::to_string(old.pid)}});
    ASSERT_TRUE(failed);
    EXPECT_EQ(failed->field("outcome"), "failed") << failed->raw;
    EXPECT_EQ(failed->priority, 4);
    EXPECT_NE(failed->field("detail").find("not trusted (name its CA in notify.webhook_ca_file)"), std::string::npos)
        << failed->raw;
    EXPECT_TRUE(scrape_until(port, [](const Scrape& s) {
                  return s.value("gpureap_watch_notifications_total", {{"channel", "webhook"}, {"outcome", "failed"}}) >= 1;
                }).parsed.value("gpureap_watch_notifications_total", {{"channel", "webhook"}, {"outcome", "sent"}}) == 0);

    write_file(host, "policy.toml",
               std::string(kFast) + webhook + "webhook_ca_file = \"" + tls.certificate + "\"\n" + rule);
    watch.signal(SIGHUP);
    ASSERT_TRUE(watch.wait_for("reload"));
    auto late = host.start({"--alloc", "1:1GiB"});  // noticed after the reload
    const auto sent = watch.wait_for("notification", {{"channel", "webhook"}, {"pid", std::to_string(late.pid)}});
    ASSERT_TRUE(sent);
    EXPECT_EQ(sent->field("outcome"), "sent") << sent->raw;
    const auto sent_count = [](const Scrape& s) {
      return s.value("gpureap_watch_notifications_total", {{"channel", "webhook"}, {"outcome", "sent"}});
    };
    EXPECT_GE(sent_count(scrape_until(port, [&](const Scrape& s) { return sent_count(s) >= 1; }).parsed), 1)
        << "counted (published at the next look)";

    // The CA file swapped for a FIFO after the load (a directory another user can write): the
    // delivery fails at once instead of waiting in open() for a writer, and SIGTERM still stops.
    ASSERT_EQ(::unlink(tls.certificate.c_str()), 0);
    ASSERT_EQ(::mkfifo(tls.certificate.c_str(), 0600), 0);
    auto swapped = host.start({"--alloc", "1:1GiB"});
    const auto refused = watch.wait_for("notification", {{"channel", "webhook"}, {"pid", std::to_string(swapped.pid)}});
    if (refused) {  // no ASSERT: returning would leave the listener thread joinable (terminate)
      EXPECT_EQ(refused->field("outcome"), "failed") << refused->raw;
      EXPECT_NE(refused->field("detail").find(tls.certificate + " is not a regular file"), std::string::npos)
          << refused->raw;
    }
    EXPECT_EQ(watch.stop(SIGTERM, 5000), 0);
    EXPECT_TRUE(running(late.pid));
    EXPECT_TRUE(running(swapped.pid));
  }
  server.stop();
  listener.join();
  {
    const std::lock_guard lock(mutex);
    ASSERT_FALSE(bodies.empty());
    bool late_arrived = false;
    for (const auto& body : bodies) {
      const auto event = nlohmann::json::parse(body);
      EXPECT_EQ(event["event"], "notice");
      late_arrived |= event["process"]["pid"] != old.pid;
    }
    EXPECT_TRUE(late_arrived) << "the untrusted deliveries reached the handler";
  }
  EXPECT_TRUE(running(old.pid));

  const std::string leaky = write_file(
      host, "leaky.toml", "[notify]\nwebhook = \"https://ops:s3cret@127.0.0.1/hook\"\n" + rule);
  const auto refused = host.gpureap({"watch", "--check-config", leaky});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_EQ(refused.err.rfind("gpureap watch: " + leaky + ":2:11: notify.webhook: credentials in the URL", 0), 0u)
      << refused.err;
  EXPECT_EQ(refused.err.find("s3cret"), std::string::npos) << refused.err;
}

// Whether `pid` has the HTTP module mapped.
bool maps_http_module(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find("gpureap-http.so") != std::string::npos;
}

TEST(WatchListen, LoadsTheHttpModuleOnlyWhenItServes) {
  SimHost host;
  const std::string policy = write_file(host, "policy.toml", std::string(kFast) + idle_terminate_rule());
  BackgroundWatch plain(host, policy);
  ASSERT_TRUE(plain.wait_for("start"));
  EXPECT_FALSE(maps_http_module(plain.pid()));
  BackgroundWatch serving(host, policy, {"--listen", "127.0.0.1:0"});
  ASSERT_TRUE(serving.wait_for("start"));
  EXPECT_TRUE(maps_http_module(serving.pid()));
  EXPECT_EQ(plain.stop(), 0);
  EXPECT_EQ(serving.stop(), 0);
}

TEST(WatchListen, RefusesServeOptionsWithoutListenAndAnAddressInUse) {
  SimHost host;
  const std::string policy = write_file(host, "policy.toml", std::string(kFast) + idle_terminate_rule());
  const auto without = host.gpureap({"watch", "--policy", policy, "--per-process"});
  EXPECT_EQ(without.exit_code, 2);
  EXPECT_NE(without.err.find("apply to --listen"), std::string::npos) << without.err;
  EXPECT_EQ(host.gpureap({"watch", "--policy", policy, "--no-kernel-log"}).exit_code, 2);
  const auto contradiction =
      host.gpureap({"watch", "--policy", policy, "--listen", "127.0.0.1:0", "--kernel-log", policy, "--no-kernel-log"});
  EXPECT_EQ(contradiction.exit_code, 2);
  EXPECT_EQ(contradiction.err, "gpureap watch: --kernel-log and --no-kernel-log contradict each other\n");
  const auto missing = host.gpureap(
      {"watch", "--policy", policy, "--listen", "127.0.0.1:0", "--kernel-log", host.state_dir() + "/no-such.log"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err.rfind("gpureap watch: --kernel-log ", 0), 0u) << missing.err;
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << "one line: " << missing.err;
  httplib::Server taken;
  const int port = taken.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  const auto in_use = host.gpureap({"watch", "--policy", policy, "--listen", "127.0.0.1:" + std::to_string(port)});
  EXPECT_EQ(in_use.exit_code, 12);
  EXPECT_NE(in_use.err.find("cannot serve on 127.0.0.1:" + std::to_string(port)), std::string::npos) << in_use.err;
}

}  // namespace
}  // namespace gpureap::test
