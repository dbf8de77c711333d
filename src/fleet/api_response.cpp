#include "fleet/api_response.hpp"

#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace gpureap {
namespace {

using nlohmann::json;

// Whether the JSON text nests arrays and objects deeper than `limit`: one pass over the bytes,
// brackets inside strings not counted. Checked before parsing, so that a body of "[[[[..."
// is refused before it costs memory per level. (nlohmann's parse callback could stop it too,
// but its parser then scans the parent array at the end of every object: quadratic in the
// number of samples, seconds for a large fleet.)
bool nests_deeper_than(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// The API writes sample values as strings: "12345", "1.5e+10", "NaN", "+Inf", "-Inf".
std::optional<double> parse_value(const json& text) {
  if (!text.is_string()) return std::nullopt;
  std::string_view s = text.get_ref<const std::string&>();
  if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (s == "+Inf") return std::numeric_limits<double>::infinity();
  if (s == "-Inf") return -std::numeric_limits<double>::infinity();
  double value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || std::isnan(value) || std::isinf(value)) return std::nullopt;
  return value;
}

// A server's phrase, cut so that an error page cannot fill the terminal.
std::string quoted(const json& value) {
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  if (text.size() > 300) text = text.substr(0, 300) + "...";
  return text;
}

std::optional<Sample> parse_sample(const json& item, double& evaluated_at, std::string& why) {
  if (!item.is_object()) {
    why = "a result that is not an object";
    return std::nullopt;
  }
  const auto metric = item.find("metric");
  const auto value = item.find("value");
  if (metric == item.end() || !metric->is_object() || value == item.end() || !value->is_array() ||
      value->size() != 2 || !(*value)[0].is_number()) {
    why = "a result without \"metric\" and \"value\": [time, \"number\"]";
    return std::nullopt;
  }
  Sample sample;
  for (const auto& [name, label] : metric->items()) {
    if (!label.is_string()) {
      why = "a label value that is not a string";
      return std::nullopt;
    }
    sample.labels.emplace(name, label.get<std::string>());
  }
  const auto number = parse_value((*value)[1]);
  if (!number) {
    why = "a sample value that is not a number";
    return std::nullopt;
  }
  sample.value = *number;
  evaluated_at = (*value)[0].get<double>();
  return sample;
}

}  // namespace

QueryResult parse_query_response(std::string_view body, int http_status) {
  if (nests_deeper_than(body, kMaxResponseDepth)) {
    return query_failure(QueryFailureKind::BadAnswer,
                         fmt::format("the answer nests deeper than the API does (HTTP {}): not Prometheus?", http_status));
  }
  json document;
  try {
    document = json::parse(body);
  } catch (const json::exception&) {
    if (http_status < 200 || http_status > 299) {
      return query_failure(QueryFailureKind::ApiError,
                    fmt::format("HTTP {}, and the body is not the API's JSON (a proxy in the way, or not Prometheus)",
                                http_status));
    }
    return query_failure(QueryFailureKind::BadAnswer, "the answer is not JSON: is this URL a Prometheus server?");
  }
  if (!document.is_object()) return query_failure(QueryFailureKind::BadAnswer, "the answer is not a JSON object");
  const auto status = document.find("status");
  if (status != document.end() && *status == "error") {
    const auto type = document.find("errorType");
    const auto error = document.find("error");
    return query_failure(QueryFailureKind::ApiError,
                  fmt::format("HTTP {}: {}: {}", http_status, type == document.end() ? "error" : quoted(*type),
                              error == document.end() ? "(no message)" : quoted(*error)));
  }
  if (http_status < 200 || http_status > 299) {
    return query_failure(QueryFailureKind::ApiError, fmt::format("HTTP {} without the API's error message", http_status));
  }
  if (status == document.end() || *status != "success") {
    return query_failure(QueryFailureKind::BadAnswer, "the answer has no \"status\": \"success\"");
  }
  const auto data = document.find("data");
  if (data == document.end() || !data->is_object()) return query_failure(QueryFailureKind::BadAnswer, "the answer has no \"data\" object");
  const auto type = data->find("resultType");
  const auto result = data->find("result");
  if (type == data->end() || *type != "vector" || result == data->end() || !result->is_array()) {
    return query_failure(QueryFailureKind::BadAnswer, "the answer is not an instant vector (\"resultType\": \"vector\")");
  }
  QueryResult parsed;
  parsed.samples.reserve(result->size());
  for (const auto& item : *result) {
    std::string why;
    auto sample = parse_sample(item, parsed.evaluated_at, why);
    if (!sample) return query_failure(QueryFailureKind::BadAnswer, "the answer holds " + why);
    parsed.samples.push_back(std::move(*sample));
  }
  if (const auto warnings = document.find("warnings"); warnings != document.end() && warnings->is_array()) {
    for (const auto& warning : *warnings) {
      if (parsed.warnings.size() < 10) parsed.warnings.push_back(quoted(warning));
    }
  }
  return parsed;
}

}  // namespace gpureap
