// The critical-Xid alert (deploy/prometheus/gpureap-alerts.yml) names the Xids doctor's catalog
// calls critical, no more and no fewer: a catalog change must reach the alert.
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "doctor/xid_catalog.hpp"

namespace gpureap {
namespace {

std::set<unsigned> critical_in_catalog() {
  std::set<unsigned> critical;
  for (unsigned xid = 1; xid <= kMaxXid; ++xid) {
    XidEvent event;
    event.xid = xid;
    if (xid_severity(describe_xid(event).action) == Severity::Critical) critical.insert(xid);
  }
  return critical;
}

std::set<unsigned> critical_in_alert() {
  std::ifstream file(std::string(GPUREAP_DEPLOY_DIR) + "/prometheus/gpureap-alerts.yml");
  std::stringstream text;
  text << file.rdbuf();
  const std::string rules = text.str();
  const std::string marker = "gpureap_xid_last_event_timestamp_seconds{xid=~\"";
  const std::size_t at = rules.find(marker);
  if (at == std::string::npos) return {};
  const std::size_t start = at + marker.size();
  std::stringstream list(rules.substr(start, rules.find('"', start) - start));
  std::set<unsigned> xids;
  for (std::string item; std::getline(list, item, '|');) xids.insert(static_cast<unsigned>(std::stoul(item)));
  return xids;
}

TEST(DeployAlerts, TheCriticalXidAlertNamesExactlyTheCatalogsCriticalXids) {
  const auto catalog = critical_in_catalog();
  EXPECT_EQ(catalog, (std::set<unsigned>{48, 62, 64, 74, 79, 95, 119, 120}));  // 154 depends on its message
  EXPECT_EQ(critical_in_alert(), catalog);
}

}  // namespace
}  // namespace gpureap
