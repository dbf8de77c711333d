#include "metrics/text_format.hpp"

#include <cmath>

#include <fmt/format.h>

#include "text/utf8.hpp"

namespace gpureap {
namespace {

// Escapes for the text format; invalid UTF-8 bytes become U+FFFD. `in_label` adds '"'.
void append_escaped(std::string_view text, bool in_label, std::string& out) {
  for (std::size_t at = 0; at < text.size();) {
    const char c = text[at];
    if (static_cast<unsigned char>(c) < 0x80) {
      if (c == '\\') out += "\\\\";
      else if (c == '\n') out += "\\n";
      else if (c == '"' && in_label) out += "\\\"";
      else out += c;
      ++at;
      continue;
    }
    const utf8::Char decoded = utf8::decode(text, at);
    if (decoded.valid) out.append(text.substr(at, decoded.size));
    else out += "\xEF\xBF\xBD";
    at += decoded.size;
  }
}

void append_value(double value, std::string& out) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
  } else if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    // Whole numbers (bytes, counts) exactly, without an exponent.
    fmt::format_to(std::back_inserter(out), "{}", static_cast<long long>(value));
  } else {
    fmt::format_to(std::back_inserter(out), "{}", value);  // shortest form that reads back the same
  }
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  append_escaped(value, true, out);
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  append_escaped(help, false, out);
  return out;
}

std::string format_sample_value(double value) {
  std::string out;
  append_value(value, out);
  return out;
}

void append_text_format(const MetricSet& metrics, std::string& out) {
  for (const MetricFamily& family : metrics.families()) {
    out += "# HELP ";
    out += family.name;
    out += ' ';
    append_escaped(family.help, false, out);
    out += "\n# TYPE ";
    out += family.name;
    out += ' ';
    out += metric_type_name(family.type);
    out += '\n';
    for (const MetricSample& sample : family.samples) {
      out += family.name;
      if (!sample.labels.empty()) {
        out += '{';
        for (std::size_t i = 0; i < sample.labels.size(); ++i) {
          if (i > 0) out += ',';
          out += sample.labels[i].name;
          out += "=\"";
          append_escaped(sample.labels[i].value, true, out);
          out += '"';
        }
        out += '}';
      }
      out += ' ';
      append_value(sample.value, out);
      out += '\n';
    }
  }
}

std::string render_text_format(const MetricSet& metrics) {
  std::string out;
  append_text_format(metrics, out);
  return out;
}

}  // namespace gpureap
