#include "metrics/snapshot_metrics.hpp"
#include "text/sanitize.hpp"
#include "text/truncate.hpp"

namespace gpureap {

std::string outside_label(std::string_view text) { return sanitize_for_terminal(text); }

std::string command_label(std::string_view command) {
  return truncate_to_width(sanitize_for_terminal(command), kCommandLabelColumns);
}

std::string_view gpureap_version() { return GPUREAP_VERSION; }

}  // namespace gpureap
