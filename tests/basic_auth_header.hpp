// "Basic <base64 of user:password>", as a client sends it, encoded here by the tests' own
// code (not the exporter's decoder run backwards).
#pragma once

#include <string>

namespace gpureap::test {

inline std::string basic_auth_header(const std::string& user_colon_password) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  const auto& s = user_colon_password;
  for (std::size_t i = 0; i < s.size(); i += 3) {
    const unsigned n = (static_cast<unsigned char>(s[i]) << 16) |
                       (i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) << 8 : 0) |
                       (i + 2 < s.size() ? static_cast<unsigned char>(s[i + 2]) : 0);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < s.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < s.size() ? kAlphabet[n & 63] : '=';
  }
  return "Basic " + out;
}

}  // namespace gpureap::test
