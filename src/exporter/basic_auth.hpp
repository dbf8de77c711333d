// HTTP basic authentication against bcrypt hashes (the web-config's basic_auth_users),
// verified with libcrypt's crypt_r ($2y$, $2b$ and $2a$ alike) and compared in constant time.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace gpureap {

struct BasicCredentials {
  std::string user;
  std::string password;
};

// "Basic <base64 of user:password>" (the scheme's case ignored); nullopt for anything else:
// another scheme, bad base64, no ':'. Input from the network: bounded, never trusted.
std::optional<BasicCredentials> parse_basic_authorization(std::string_view header);

// $2a$, $2b$ or $2y$, a two-digit cost from 04 to 31, '$', then 53 characters of bcrypt's
// alphabet (22 of salt, 31 of hash).
bool bcrypt_hash_is_valid(std::string_view hash);
// Whether `password` hashes to `hash`; the comparison takes the same time wherever they differ.
bool bcrypt_verify(std::string_view password, const std::string& hash);

class BasicAuthenticator {
 public:
  explicit BasicAuthenticator(std::map<std::string, std::string> users);

  // True when the Authorization header names a user with the right password. An unknown
  // user costs a bcrypt run too, so the time taken does not tell names apart. A password that
  // passed is remembered per user: bcrypt costs tens of milliseconds by design, and every
  // scrape would pay it (exporter-toolkit keeps such a cache as well).
  bool allows(std::string_view authorization_header);

 private:
  std::map<std::string, std::string> users_;
  std::string dummy_hash_;
  std::mutex mutex_;
  std::map<std::string, std::string> verified_;  // user -> the password that last passed
};

// Equal in time independent of where they differ (their lengths may show).
bool equal_in_constant_time(std::string_view a, std::string_view b);

}  // namespace gpureap
