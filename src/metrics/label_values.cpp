#include "metrics/snapshot_metrics.hpp"
#include "text/sanitize.hpp"
#include "text/truncate.hpp"

namespace gpureap {

// UTF-8 whatever the exporter's locale: a scrape reads the same labels from every host.
std::string outside_label(std::string_view text) { return sanitize_for_terminal(text, Charset::Utf8); }

std::string command_label(std::string_view command) {
  return truncate_to_width(sanitize_for_terminal(command, Charset::Utf8), kCommandLabelColumns, Charset::Utf8);
}

std::string_view gpureap_version() { return GPUREAP_VERSION; }

}  // namespace gpureap
