// The one parser for every time option (kill --timeout/--verify-timeout, doctor --settle/
// --since/--timeout/--verify-timeout, ps --watch) and for bounded amounts such as
// doctor --tolerance-mib. A value is accepted only when it is written in plain decimal, is
// finite and lies within the option's documented bound: `--timeout nan` must not mean SIGKILL
// at once.
//
// Grammar: DIGITS[.DIGITS] or .DIGITS, at most 20 characters, then for a duration an optional
// unit: ms, s (the default), m, h or d. No sign, exponent, spaces, "nan" or "inf".
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpureap {

// Seconds in "10", "2.5", "500ms", "90s", "30m", "6h", "2d"; nullopt when malformed, above
// max_seconds or below min_seconds, with the reason (one phrase, no option name) in *why.
std::optional<double> parse_duration(std::string_view text, double max_seconds, std::string* why = nullptr,
                                     double min_seconds = 0);

// A plain non-negative decimal number no larger than max (no unit).
std::optional<double> parse_bounded_number(std::string_view text, double max, std::string* why = nullptr);

// For option parsing: empty when `text` is a valid duration for `option` (stored in `seconds`),
// otherwise one line for the user, e.g.
//   "--timeout nan: not a duration: give seconds from 0 to 3600 (1h), such as 10, 2.5, 500ms, 90s or 5m".
std::string check_duration_option(std::string_view option, std::string_view text, double max_seconds,
                                  double& seconds, double min_seconds = 0);

// The same for a plain number with a unit name for the message ("MiB").
std::string check_number_option(std::string_view option, std::string_view text, double max, std::string_view unit,
                                double& value);

}  // namespace gpureap
