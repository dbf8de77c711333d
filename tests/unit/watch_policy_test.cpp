// The watch policy file: a valid one read in full, and each kind of mistake refused with one
// line naming the file, line and column; sizes; the log's key=value fields.
#include <cmath>

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "text/byte_size.hpp"
#include "watch/event_log.hpp"
#include "watch/policy.hpp"

namespace gpureap {
namespace {

const char* kValid = R"(mode = "enforce"
interval = "250ms"
full_scan_interval = "1m"
audit_log = "/var/log/gpureap/watch.log"

[terminate]
kill_timeout = "5s"
verify_timeout = "20s"

[limits]
max_terminations = 2
window = "10m"

[notify]
command = ["/usr/local/bin/notify", "--channel", "gpu"]
command_timeout = "3s"
webhook = "https://hooks.example.org/gpureap"

[exclude]
users = ["root", 4242]
executables = ["/usr/bin/nvidia-smi", "/opt/monitoring/*"]

[[rule]]
name = "idle-notebooks"
condition = "idle"
idle_for = "2h"
max_sm_util = 3
max_cpu_percent = 0.5
command = "jupyter|ipykernel"
gpus = [0, "GPU-5b3f0c01"]
containers = ["4f2a9c"]
min_memory = "1.5GiB"
users = ["root"]
groups = ["root"]
action = "terminate"
grace = "30m"
except_executables = ["/usr/bin/python3-keep"]

[[rule]]
name = "orphans"
condition = "orphan"
action = "terminate"

[[rule]]
name = "big"
condition = "memory"
memory_above = "40GiB"
action = "notify"
)";

std::optional<Policy> parse(const std::string& text, std::string& error) {
  return parse_policy(text, "policy.toml", error);
}

// The error for `text`, which must be refused.
std::string refusal(const std::string& text) {
  std::string error;
  const auto policy = parse(text, error);
  EXPECT_FALSE(policy.has_value()) << text;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  return error;
}

TEST(WatchPolicy, AValidFileIsReadInFull) {
  std::string error;
  const auto policy = parse(kValid, error);
  ASSERT_TRUE(policy) << error;
  EXPECT_EQ(policy->mode, WatchMode::Enforce);
  EXPECT_DOUBLE_EQ(policy->interval_seconds, 0.25);
  EXPECT_DOUBLE_EQ(policy->full_scan_seconds, 60);
  EXPECT_EQ(policy->audit_log, "/var/log/gpureap/watch.log");
  EXPECT_DOUBLE_EQ(policy->kill_timeout_seconds, 5);
  EXPECT_DOUBLE_EQ(policy->verify_timeout_seconds, 20);
  EXPECT_EQ(policy->max_terminations, 2u);
  EXPECT_DOUBLE_EQ(policy->cap_window(), 600);
  EXPECT_EQ(policy->notify.command.size(), 3u);
  EXPECT_DOUBLE_EQ(policy->notify.command_timeout_seconds, 3);
  EXPECT_EQ(policy->notify.webhook, "https://hooks.example.org/gpureap");
  ASSERT_EQ(policy->exclude.users.size(), 2u);
  EXPECT_EQ(policy->exclude.users[0].id, 0u);
  EXPECT_EQ(policy->exclude.users[1].id, 4242u);
  EXPECT_EQ(policy->exclude.executables.size(), 2u);
  ASSERT_EQ(policy->rules.size(), 3u);
  const Rule& idle = policy->rules[0];
  EXPECT_EQ(idle.name, "idle-notebooks");
  EXPECT_EQ(idle.condition, Condition::Idle);
  EXPECT_DOUBLE_EQ(idle.idle_seconds, 7200);
  EXPECT_EQ(idle.max_sm_util_percent, 3u);
  EXPECT_DOUBLE_EQ(idle.max_cpu_percent, 0.5);
  EXPECT_EQ(idle.action, RuleAction::Terminate);
  EXPECT_DOUBLE_EQ(idle.grace_seconds, 1800);
  ASSERT_TRUE(idle.match.command);
  EXPECT_TRUE(idle.match.command->search("python -m ipykernel_launcher"));
  ASSERT_EQ(idle.match.gpus.size(), 2u);
  EXPECT_EQ(idle.match.gpus[0].index, 0u);
  EXPECT_EQ(idle.match.gpus[1].uuid, "gpu-5b3f0c01");
  EXPECT_EQ(idle.match.min_memory, 3ull << 29);
  EXPECT_EQ(idle.except.executables.size(), 1u);
  EXPECT_EQ(policy->rules[1].condition, Condition::Orphan);
  EXPECT_DOUBLE_EQ(policy->rules[1].grace_seconds, 600) << "terminate's default grace";
  EXPECT_EQ(policy->rules[2].memory_above_bytes, 40ull << 30);
}

TEST(WatchPolicy, DefaultsAreDryRunAndAnEmptyFileIsValid) {
  std::string error;
  const auto policy = parse("", error);
  ASSERT_TRUE(policy) << error;
  EXPECT_EQ(policy->mode, WatchMode::DryRun);
  EXPECT_TRUE(policy->rules.empty());
  EXPECT_DOUBLE_EQ(policy->cap_window(), policy->interval_seconds);
}

TEST(WatchPolicy, AnUnknownKeyIsNamedWithLineAndColumn) {
  EXPECT_EQ(refusal("mode = \"dry-run\"\nintervall = \"5s\"\n").rfind("policy.toml:2:1: unknown key 'intervall'", 0), 0u);
  const std::string in_rule = refusal("[[rule]]\nname = \"a\"\ncondition = \"orphan\"\n  gracee = \"1m\"\n");
  EXPECT_EQ(in_rule.rfind("policy.toml:4:3: unknown key 'rule.gracee'", 0), 0u) << in_rule;
  EXPECT_NE(refusal("[notfy]\ncommand = [\"/bin/true\"]\n").find("unknown section 'notfy'"), std::string::npos);
}

TEST(WatchPolicy, AValueOfTheWrongTypeIsRefused) {
  EXPECT_EQ(refusal("interval = 10\n"), "policy.toml:1:12: interval must be a duration string such as \"30s\", \"10m\" or \"2h\"");
  EXPECT_EQ(refusal("[limits]\nmax_terminations = \"3\"\n").rfind("policy.toml:2:20: limits.max_terminations must be", 0), 0u);
  EXPECT_EQ(refusal("[notify]\ncommand = \"/bin/notify --all\"\n").rfind("policy.toml:2:11: notify.command must be an array", 0), 0u);
  EXPECT_NE(refusal("[notify]\ncommand = [\"notify\"]\n").find("absolute path: it is run directly, never by a shell"),
            std::string::npos);
  EXPECT_NE(refusal("rule = 3\n").find("[[rule]]"), std::string::npos);
}

TEST(WatchPolicy, AnImpossibleDurationOrSizeIsRefused) {
  for (const char* bad : {"\"nan\"", "\"-5m\"", "\"1e3s\"", "\"5 m\"", "\"\"", "\"99999d\""}) {
    const std::string error = refusal(std::string("interval = ") + bad + "\n");
    EXPECT_EQ(error.rfind("policy.toml:1:12: interval ", 0), 0u) << bad << ": " << error;
  }
  EXPECT_NE(refusal("interval = \"10ms\"\n").find("too short"), std::string::npos);
  EXPECT_NE(refusal("interval = \"1m\"\nfull_scan_interval = \"10s\"\n").find("at least the interval"), std::string::npos);
  const std::string size =
      refusal("[[rule]]\nname = \"m\"\ncondition = \"memory\"\nmemory_above = \"lots\"\n");
  EXPECT_EQ(size.rfind("policy.toml:4:16: memory_above lots: not a size", 0), 0u) << size;
  const std::string idle = refusal("[[rule]]\nname = \"i\"\ncondition = \"idle\"\nidle_for = \"-1h\"\n");
  EXPECT_EQ(idle.rfind("policy.toml:4:12: idle_for -1h: not a duration", 0), 0u) << idle;
}

TEST(WatchPolicy, AnUnknownUserOrGroupIsRefused) {
  const std::string user = refusal("[[rule]]\nname = \"u\"\ncondition = \"orphan\"\nusers = [\"root\", \"no-such-user-gpureap\"]\n");
  EXPECT_EQ(user.rfind("policy.toml:4:18: users: no such user \"no-such-user-gpureap\"", 0), 0u) << user;
  const std::string group = refusal("[exclude]\ngroups = [\"no-such-group-gpureap\"]\n");
  EXPECT_EQ(group.rfind("policy.toml:2:11: exclude.groups: no such group \"no-such-group-gpureap\"", 0), 0u) << group;
}

TEST(WatchPolicy, AnInvalidRegularExpressionIsRefused) {
  const std::string error = refusal("[[rule]]\nname = \"r\"\ncondition = \"orphan\"\ncommand = \"(unclosed\"\n");
  EXPECT_EQ(error.rfind("policy.toml:4:11: command: ", 0), 0u) << error;
  EXPECT_NE(error.find("missing )"), std::string::npos) << error;
}

TEST(WatchPolicy, AnUnknownModeConditionOrActionIsRefused) {
  EXPECT_EQ(refusal("mode = \"kill-everything\"\n").rfind("policy.toml:1:8: mode \"kill-everything\": give \"dry-run\"", 0), 0u);
  EXPECT_NE(refusal("[[rule]]\nname = \"c\"\ncondition = \"sleepy\"\n").find("condition \"sleepy\": give one of"),
            std::string::npos);
  EXPECT_NE(refusal("[[rule]]\nname = \"a\"\ncondition = \"orphan\"\naction = \"nuke\"\n").find("action \"nuke\""),
            std::string::npos);
}

TEST(WatchPolicy, RulesMustBeCoherent) {
  // A condition's parameter under another condition, a missing parameter, grace without
  // terminate, notify without a channel, two rules of one name, a name unfit for a label.
  EXPECT_NE(refusal("[[rule]]\nname = \"a\"\ncondition = \"orphan\"\nidle_for = \"1h\"\n")
                .find("policy.toml:4:12: rule \"a\": idle_for applies to condition \"idle\" only"),
            std::string::npos);
  EXPECT_NE(refusal("[[rule]]\nname = \"a\"\ncondition = \"over-age\"\n").find("needs older_than"), std::string::npos);
  EXPECT_NE(refusal("[[rule]]\nname = \"a\"\ncondition = \"orphan\"\ngrace = \"1m\"\n").find("grace applies to action"),
            std::string::npos);
  EXPECT_NE(refusal("[[rule]]\nname = \"a\"\ncondition = \"orphan\"\naction = \"notify\"\n").find("needs [notify]"),
            std::string::npos);
  EXPECT_NE(refusal("[[rule]]\nname = \"a\"\ncondition = \"orphan\"\n[[rule]]\nname = \"a\"\ncondition = \"zombie\"\n")
                .find("a second rule named \"a\""),
            std::string::npos);
  EXPECT_NE(refusal("[[rule]]\nname = \"bad name\"\ncondition = \"orphan\"\n").find("rule.name"), std::string::npos);
  EXPECT_NE(refusal("[notify]\nwebhook = \"ftp://x\"\n").find("http:// or https://"), std::string::npos);
}

TEST(WatchPolicy, AWebhookUrlTheClientCannotSendSafelyIsRefusedWithItsPlaceAndNotEchoed) {
  // Credentials: refused, and neither the password nor the URL reaches the message.
  const std::string credentials = refusal("[notify]\nwebhook = \"https://ops:s3cret@hooks.example.org/x\"\n");
  EXPECT_EQ(credentials.rfind("policy.toml:2:11: notify.webhook: credentials in the URL", 0), 0u) << credentials;
  EXPECT_EQ(credentials.find("s3cret"), std::string::npos) << credentials;
  EXPECT_EQ(credentials.find("--password-file"), std::string::npos) << "fleet's advice, not the policy's";
  // Terminal escapes (a TOML \u escape) never reach the message raw.
  const std::string escape = refusal("[notify]\nwebhook = \"https://h.example/\\u001b]0;pwned\\u0007\"\n");
  EXPECT_EQ(escape.rfind("policy.toml:2:11: notify.webhook: ", 0), 0u) << escape;
  EXPECT_EQ(escape.find('\x1b'), std::string::npos) << escape;
  EXPECT_EQ(escape.find("pwned"), std::string::npos) << escape;
  for (const char* bad : {"https://h.example/x#frag", "https://h.example:99999/x", "https://:443/x", "http://h.example?x=1",
                          "https://h.example/caf\u00e9"}) {
    EXPECT_EQ(refusal(std::string("[notify]\nwebhook = \"") + bad + "\"\n").rfind("policy.toml:2:11: notify.webhook: ", 0),
              0u)
        << bad;
  }
  // A query after a path, and IPv6, are sent as written.
  std::string error;
  const auto policy = parse("[notify]\nwebhook = \"http://[::1]:9000/hooks/gpureap?team=gpu%20ops\"\n", error);
  ASSERT_TRUE(policy) << error;
  EXPECT_EQ(policy->notify.webhook_ca_file, "");
}

TEST(WatchPolicy, AWebhookCaFileMustBeAPemFileForAnHttpsWebhook) {
  const std::string dir = ::testing::TempDir();
  const std::string ca = dir + "/gpureap-webhook-ca.pem";
  std::ofstream(ca) << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  std::string error;
  const auto policy = parse("[notify]\nwebhook = \"https://h.example/x\"\nwebhook_ca_file = \"" + ca + "\"\n", error);
  ASSERT_TRUE(policy) << error;
  EXPECT_EQ(policy->notify.webhook_ca_file, ca);

  const std::string missing = refusal("[notify]\nwebhook = \"https://h.example/x\"\nwebhook_ca_file = \"" + dir + "/none.pem\"\n");
  EXPECT_EQ(missing.rfind("policy.toml:3:19: notify.webhook_ca_file " + dir + "/none.pem: cannot open it", 0), 0u) << missing;
  const std::string key = dir + "/gpureap-webhook-key.pem";
  std::ofstream(key) << "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";
  EXPECT_NE(refusal("[notify]\nwebhook = \"https://h.example/x\"\nwebhook_ca_file = \"" + key + "\"\n")
                .find("policy.toml:3:19: notify.webhook_ca_file " + key + " holds no PEM certificate"),
            std::string::npos);
  EXPECT_NE(refusal("[notify]\nwebhook = \"https://h.example/x\"\nwebhook_ca_file = \"" + dir + "\"\n").find("is not a regular file"),
            std::string::npos);
  EXPECT_NE(refusal("[notify]\nwebhook = \"https://h.example/x\"\nwebhook_ca_file = \"ca.pem\"\n").find("must be an absolute path"),
            std::string::npos);
  EXPECT_EQ(refusal("[notify]\nwebhook = \"http://h.example/x\"\nwebhook_ca_file = \"" + ca + "\"\n"),
            "policy.toml:3:19: notify.webhook_ca_file applies to an https:// webhook only");
  EXPECT_EQ(refusal("[notify]\nwebhook_ca_file = \"" + ca + "\"\n"),
            "policy.toml:2:19: notify.webhook_ca_file applies to an https:// webhook only");
  EXPECT_NE(refusal("[notify]\nwebhook_ca = \"" + ca + "\"\n").find("policy.toml:2:1: unknown "), std::string::npos);
}

TEST(WatchPolicy, TomlSyntaxErrorsAreOneSanitisedLine) {
  const std::string error = refusal("mode = \"dry-run\x1b]0;pwned\x07\n");
  EXPECT_EQ(error.rfind("policy.toml:1:", 0), 0u) << error;
  EXPECT_EQ(error.find('\x1b'), std::string::npos) << error;
}

TEST(WatchPolicy, GpusNamedAreCheckedAgainstTheHost) {
  std::string error;
  const auto policy =
      parse("[[rule]]\nname = \"g\"\ncondition = \"orphan\"\ngpus = [1, \"GPU-aa\"]\n", error);
  ASSERT_TRUE(policy) << error;
  EXPECT_EQ(check_policy_gpus(*policy, {{0, "gpu-aa01"}, {1, "gpu-bb02"}}), "");
  EXPECT_EQ(check_policy_gpus(*policy, {{0, "gpu-aa01"}}),
            "policy.toml:4:9: rule \"g\": gpus: no GPU 1 on this host (it has: 0)");
  EXPECT_NE(check_policy_gpus(*policy, {{0, "gpu-aa01"}, {1, "gpu-aa02"}}).find("names more than one GPU"),
            std::string::npos);
}

TEST(WatchPolicy, GpusByPciAddressNameAmdOrIntelGpusCheckedAgainstSysfs) {
  std::string error;
  const auto policy = parse("[[rule]]\nname = \"g\"\ncondition = \"memory\"\nmemory_above = \"1GiB\"\ngpus = [0, \"0000:0A:00.0\"]\n", error);
  ASSERT_TRUE(policy) << error;
  const auto& gpus = policy->rules.at(0).match.gpus;
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[1].pci, "0000:0a:00.0");
  EXPECT_FALSE(gpus[1].index);
  EXPECT_EQ(gpus[1].uuid, "");
  EXPECT_EQ(check_policy_gpus(*policy, {{0, "gpu-aa01"}}), "") << "NVIDIA's check leaves PCI addresses to sysfs";
  EXPECT_EQ(check_policy_drm_gpus(*policy, {"0000:03:00.0", "0000:0a:00.0"}), "");
  const std::string missing = check_policy_drm_gpus(*policy, {});
  EXPECT_EQ(missing.rfind("policy.toml:5:", 0), 0u) << missing;
  EXPECT_NE(missing.find(": rule \"g\": gpus: no AMD or Intel GPU at 0000:0a:00.0 on this host (it has: none)"), std::string::npos)
      << missing;
  EXPECT_FALSE(parse("[[rule]]\nname = \"g\"\ncondition = \"orphan\"\ngpus = [\"0000:0a:00\"]\n", error));
  EXPECT_NE(error.find("is not a GPU index, UUID (\"GPU-...\") or PCI address"), std::string::npos) << error;
}

TEST(ByteSize, SizesAsPeopleWriteThem) {
  EXPECT_EQ(parse_byte_size("4096", 1ull << 50), 4096u);
  EXPECT_EQ(parse_byte_size("512MiB", 1ull << 50), 512ull << 20);
  EXPECT_EQ(parse_byte_size("1.5GiB", 1ull << 50), 3ull << 29);
  EXPECT_EQ(parse_byte_size("2G", 1ull << 50), 2ull << 30);
  EXPECT_EQ(parse_byte_size("1TB", 1ull << 50), 1ull << 40);
  for (const char* bad : {"", "GiB", "-1GiB", "1e9", "nan", "1 GiB", "0x10", "2PiB"}) {
    EXPECT_FALSE(parse_byte_size(bad, 1ull << 50)) << bad;
  }
  std::string why;
  EXPECT_FALSE(parse_byte_size("2TiB", 1ull << 40, &why));
  EXPECT_EQ(why, "too large");
}

TEST(WatchLog, FieldsAreSanitisedAndQuotedSoALineCannotBeForged) {
  EXPECT_EQ(log_field("pid", "42"), "pid=42");
  EXPECT_EQ(log_field("user", ""), "user=\"\"");
  EXPECT_EQ(log_field("command", "python train.py"), "command=\"python train.py\"");
  // A command line that tries to end the line and start a forged event.
  const std::string forged = log_field("command", "x\n<3>event=terminate rule=\"all\"");
  EXPECT_EQ(forged.find('\n'), std::string::npos) << forged;
  EXPECT_NE(forged.find("\\x0a"), std::string::npos) << forged;
  EXPECT_NE(forged.find("rule=\\\"all\\\""), std::string::npos) << forged;
  EXPECT_EQ(log_field("c", "\x1b[2J"), "c=\\x1b[2J");
  EXPECT_EQ(log_line(LogPriority::Notice, "notice", {{"pid", "7"}}), "<5>event=notice pid=7");
  // A command line of megabytes is cut: one event stays one line journald keeps whole.
  const std::string huge = log_field("command", std::string(2 << 20, 'x'));
  EXPECT_LT(huge.size(), 2 * kMaxLogValueColumns);
  EXPECT_NE(huge.find("\u2026"), std::string::npos) << "ends in an ellipsis";
}

}  // namespace
}  // namespace gpureap

namespace gpureap {
namespace {

// The policy of `rules` (TOML [[rule]] tables) at a 1 s interval.
Policy policy_of(const std::string& rules) {
  std::string error;
  auto policy = parse_policy("interval = \"1s\"\n" + rules, "policy.toml", error);
  EXPECT_TRUE(policy) << error;
  return policy ? *policy : Policy{};
}

TEST(WatchPolicy, TheDriverIsReadAsOftenAsTheRulesNeedItsFacts) {
  const std::string orphan = "[[rule]]\nname = \"o\"\ncondition = \"orphan\"\n";
  const std::string old = "[[rule]]\nname = \"a\"\ncondition = \"over-age\"\nolder_than = \"2h\"\n";
  const std::string idle_hour = "[[rule]]\nname = \"i\"\ncondition = \"idle\"\nidle_for = \"1h\"\n";
  const std::string idle_minute = "[[rule]]\nname = \"j\"\ncondition = \"idle\"\nidle_for = \"2m\"\n";
  const std::string idle_brief = "[[rule]]\nname = \"k\"\ncondition = \"idle\"\nidle_for = \"5s\"\n";
  const std::string memory = "[[rule]]\nname = \"m\"\ncondition = \"memory\"\nmemory_above = \"1GiB\"\n";
  EXPECT_TRUE(std::isinf(driver_read_seconds(policy_of(orphan + old)))) << "the kernel's facts: full scans only";
  EXPECT_DOUBLE_EQ(driver_read_seconds(policy_of(orphan + "min_memory = \"1GiB\"\n")), kMaxDriverReadSeconds);
  EXPECT_DOUBLE_EQ(driver_read_seconds(policy_of(idle_hour)), kMaxDriverReadSeconds);
  EXPECT_DOUBLE_EQ(driver_read_seconds(policy_of(orphan + idle_minute)), 12);
  EXPECT_DOUBLE_EQ(driver_read_seconds(policy_of(idle_brief)), 1) << "never more often than the looks";
  EXPECT_DOUBLE_EQ(driver_read_seconds(policy_of(idle_hour + memory)), 1) << "a memory rule: every look";
}

}  // namespace
}  // namespace gpureap
