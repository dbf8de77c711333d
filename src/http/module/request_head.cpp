#include "http/module/request_head.hpp"

#include <cctype>
#include <optional>

namespace gpureap_http_serving {
namespace {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// The body size the head announces: 0 without one, nullopt when it cannot be waited for.
std::optional<std::size_t> announced_body(std::string_view head) {
  std::size_t body = 0;
  std::size_t line_start = head.find("\r\n");  // past the request line
  while (line_start != std::string_view::npos && line_start + 2 < head.size()) {
    line_start += 2;
    const std::size_t line_end = head.find("\r\n", line_start);
    const std::string_view line = head.substr(line_start, line_end - line_start);
    line_start = line_end;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim(line.substr(colon + 1));
    if (equals_ignoring_case(name, "transfer-encoding")) return std::nullopt;
    if (!equals_ignoring_case(name, "content-length")) continue;
    if (value.empty() || value.size() > 6) return std::nullopt;
    std::size_t size = 0;
    for (const char c : value) {
      if (c < '0' || c > '9') return std::nullopt;
      size = size * 10 + static_cast<std::size_t>(c - '0');
    }
    body = size;
  }
  return body;
}

// A line ended by LF alone: httplib refuses such a request line but skips such a header line
// and reads the next, so a head that has one would be framed differently here and there
// (a Content-Length after it counts for httplib only), and one ended by "\n\n" never ends here.
bool has_bare_line_feed(std::string_view head) {
  for (std::size_t at = head.find('\n'); at != std::string_view::npos; at = head.find('\n', at + 1)) {
    if (at == 0 || head[at - 1] != '\r') return true;
  }
  return false;
}

}  // namespace

RequestArrival assess_request(std::string_view received) {
  const std::size_t blank_line = received.find("\r\n\r\n");
  const std::size_t head_so_far = blank_line == std::string_view::npos ? received.size() : blank_line + 4;
  if (has_bare_line_feed(received.substr(0, head_so_far))) return RequestArrival::kRefused;
  if (blank_line == std::string_view::npos) {
    return received.size() >= kMaxRequestBytes ? RequestArrival::kTooLarge : RequestArrival::kIncomplete;
  }
  const std::size_t head_size = blank_line + 4;
  const std::optional<std::size_t> body = announced_body(received.substr(0, head_size));
  if (!body) return RequestArrival::kRefused;
  if (head_size + *body > kMaxRequestBytes) return RequestArrival::kTooLarge;
  return received.size() >= head_size + *body ? RequestArrival::kComplete : RequestArrival::kIncomplete;
}

}  // namespace gpureap_http_serving
