// What a person and a script see of a fleet view, above all when the scraped hosts chose
// hostile label values (the exporter's users, containers and command lines).
#include "cli/fleet/fleet_render.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/fleet/fleet_json.hpp"
#include "text/truncate.hpp"

namespace gpureap {
namespace {

constexpr double kRenderNow = 1'800'000'000;

FleetView hostile_view() {
  FleetView view;
  view.evaluated_at = kRenderNow;
  FleetHost host;
  host.instance = "node\x1b]0;pwned\x07:9874";
  host.scrape = ScrapeState::Up;
  host.driver_up = true;
  FleetGpu gpu;
  gpu.index = "0";
  gpu.uuid = "GPU-1";
  gpu.total_bytes = 80ull << 30;
  gpu.used_bytes = 78ull << 30;
  gpu.unattributed_bytes = 2ull << 30;
  gpu.orphaned_holders = 1;
  gpu.orphaned_memory_bytes = 4ull << 30;
  gpu.top_processes.push_back(FleetProcess{"1234", "alice\x1b[2J", "docker:\r\nfake", "python\ntrain.py \xe2\x80\xae", 40ull << 30});
  gpu.last_xid = FleetXid{"79", kRenderNow - 7200};
  host.gpus.push_back(gpu);
  view.hosts.push_back(host);
  view.warnings.push_back("Prometheus: \x1b[31mred");
  return view;
}

// No byte a terminal acts on, except the line breaks the table is made of.
void expect_inert(const std::string& text) {
  for (unsigned char c : text) {
    EXPECT_FALSE((c < 0x20 && c != '\n') || c == 0x7f) << "control byte " << int(c) << " in:\n" << text;
  }
  EXPECT_EQ(text.find("\xe2\x80\xae"), std::string::npos);
}

TEST(FleetRender, HostileLabelsReachTheTerminalEscapedOnTheirOwnLine) {
  const std::string table =
      render_fleet_table(hostile_view(), "http://prom:9090", TerminalStyle(false), OutputWidth::unlimited());
  expect_inert(table);
  EXPECT_NE(table.find("node\\x1b]0;pwned\\x07:9874"), std::string::npos) << table;
  EXPECT_NE(table.find("alice\\x1b[2J"), std::string::npos) << table;
  EXPECT_NE(table.find("python\\x0atrain.py \\u202e"), std::string::npos) << table;
  EXPECT_NE(table.find("warning: Prometheus: \\x1b[31mred"), std::string::npos) << table;
  // One header line, one GPU row, one holder line, the title and the warning: a newline in a
  // label made no line of its own.
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 5) << table;
}

TEST(FleetRender, TheRowShowsMemoryUnattributedOrphansHolderAndLastXid) {
  const std::string table =
      render_fleet_table(hostile_view(), "http://prom:9090", TerminalStyle(false), OutputWidth::unlimited());
  EXPECT_NE(table.find("78.0 GiB   80.0 GiB  98%"), std::string::npos) << table;
  EXPECT_NE(table.find("2.0 GiB"), std::string::npos);
  EXPECT_NE(table.find("1 (4.0 GiB)"), std::string::npos);
  EXPECT_NE(table.find("Xid 79 GPU has fallen off the bus · 2h00m ago"), std::string::npos) << table;
  EXPECT_NE(table.find("40.0 GiB  alice"), std::string::npos) << table;
  EXPECT_NE(table.find("pid 1234"), std::string::npos);
}

TEST(FleetRender, CriticalXidsAndFullMemoryAreRedWhenColourIsOn) {
  const std::string table =
      render_fleet_table(hostile_view(), "http://prom:9090", TerminalStyle(true), OutputWidth::unlimited());
  EXPECT_NE(table.find("\x1b[31mXid 79"), std::string::npos) << table;
  EXPECT_NE(table.find("\x1b[31m 98%"), std::string::npos) << table;
  FleetView view = hostile_view();
  view.hosts[0].gpus[0].last_xid = FleetXid{"13", kRenderNow};  // an application's fault: not critical
  const std::string calm = render_fleet_table(view, "x", TerminalStyle(true), OutputWidth::unlimited());
  EXPECT_EQ(calm.find("\x1b[31mXid"), std::string::npos) << calm;
}

TEST(FleetRender, OnANarrowTerminalTheCommandIsCutNotWrapped) {
  const std::string table = render_fleet_table(hostile_view(), "x", TerminalStyle(false), OutputWidth(std::size_t{110}));
  bool seen = false;
  for (std::size_t start = 0, end; (end = table.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = table.substr(start, end - start);
    if (line.find("pid 1234") == std::string::npos) continue;
    seen = true;
    EXPECT_EQ(display_width(line), 110u) << line;
    EXPECT_EQ(line.substr(line.size() - 3), "…") << line;
  }
  EXPECT_TRUE(seen) << table;
}

TEST(FleetRender, JsonKeepsTheExactBytesAndNamesTheXid) {
  const auto json = fleet_json(hostile_view(), "http://prom:9090", 0);
  EXPECT_EQ(json["schema"], "gpureap.fleet/1");
  const auto& host = json["hosts"][0];
  EXPECT_EQ(host["instance"], "node\x1b]0;pwned\x07:9874");
  EXPECT_EQ(host["scrape"], "up");
  const auto& gpu = host["gpus"][0];
  EXPECT_EQ(gpu["memory"]["used_bytes"], 78ull << 30);
  EXPECT_TRUE(gpu["memory"]["reserved_bytes"].is_null());
  EXPECT_EQ(gpu["top_processes"][0]["pid"], 1234);
  EXPECT_EQ(gpu["top_processes"][0]["command"], "python\ntrain.py \xe2\x80\xae");
  EXPECT_EQ(gpu["last_xid"]["xid"], 79);
  EXPECT_EQ(gpu["last_xid"]["action"], "power-cycle");
  EXPECT_EQ(gpu["last_xid"]["severity"], "critical");
  EXPECT_EQ(gpu["last_xid"]["age_s"], 7200.0);
  // The dump a script reads is one valid JSON document, control bytes escaped.
  const std::string text = json.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(text)["hosts"][0]["instance"], "node\x1b]0;pwned\x07:9874");
}

TEST(FleetRender, ALabelThatIsNotANumberIsNullInJsonAndPlainInTheTable) {
  FleetView view = hostile_view();
  view.hosts[0].gpus[0].top_processes[0].pid = "12ab";
  view.hosts[0].gpus[0].last_xid = FleetXid{"x\x1b", kRenderNow};
  const auto json = fleet_json(view, "x", 0);
  EXPECT_TRUE(json["hosts"][0]["gpus"][0]["top_processes"][0]["pid"].is_null());
  EXPECT_TRUE(json["hosts"][0]["gpus"][0]["last_xid"]["xid"].is_null());
  EXPECT_TRUE(json["hosts"][0]["gpus"][0]["last_xid"]["action"].is_null());
  const std::string table = render_fleet_table(view, "x", TerminalStyle(false), OutputWidth::unlimited());
  expect_inert(table);
  EXPECT_NE(table.find("Xid x\\x1b · 0s ago"), std::string::npos) << table;
}

TEST(FleetRender, TroubleIsAHostDownADriverMissingOrALostGpu) {
  FleetView view = hostile_view();
  EXPECT_FALSE(fleet_has_trouble(view));
  view.hosts[0].gpus[0].lost = true;
  EXPECT_TRUE(fleet_has_trouble(view));
  const std::string table = render_fleet_table(view, "x", TerminalStyle(false), OutputWidth::unlimited());
  EXPECT_NE(table.find("lost: the driver cannot reach this GPU"), std::string::npos) << table;
  view = hostile_view();
  view.hosts[0].scrape = ScrapeState::Down;
  EXPECT_TRUE(fleet_has_trouble(view));
  view = hostile_view();
  view.hosts[0].driver_up = false;
  EXPECT_TRUE(fleet_has_trouble(view));
}

}  // namespace
}  // namespace gpureap
