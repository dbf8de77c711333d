// HTTP basic authentication against bcrypt hashes (the web-config's basic_auth_users),
// verified with libcrypt's crypt_r ($2y$, $2b$ and $2a$ alike) and compared in constant time.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "exporter/credential_digest.hpp"

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

// Basic auth that costs at most one bcrypt run per distinct (user, password), as Prometheus's
// exporter-toolkit does: bcrypt costs tens of milliseconds by design, and a client repeating a
// wrong password must not make every request pay it on every worker at once. One bcrypt runs
// at a time; outcomes, failures too, are remembered in a bounded cache keyed by a keyed digest
// of the credentials (credential_digest.hpp), never by the password itself.
class BasicAuthenticator {
 public:
  static constexpr std::size_t kMaxRemembered = 1024;

  explicit BasicAuthenticator(std::map<std::string, std::string> users);

  // True when the Authorization header names a user with the right password. An unknown user
  // costs a bcrypt run of the configured users' cost too, so the time taken does not tell
  // names apart.
  bool allows(std::string_view authorization_header);

  // How many times bcrypt has run (for tests and the benchmark).
  std::uint64_t bcrypt_runs() const { return bcrypt_runs_.load(); }

 private:
  std::optional<bool> remembered(const CredentialDigest& key);
  void remember(const CredentialDigest& key, bool outcome);

  std::map<std::string, std::string> users_;
  std::string dummy_hash_;
  CredentialHasher hasher_;
  std::mutex bcrypt_mutex_;  // one bcrypt at a time
  std::mutex cache_mutex_;
  std::map<CredentialDigest, bool> outcomes_;
  std::deque<CredentialDigest> order_;  // oldest first: the first forgotten
  std::atomic<std::uint64_t> bcrypt_runs_{0};
};

// Equal in time independent of where they differ (their lengths may show).
bool equal_in_constant_time(std::string_view a, std::string_view b);

}  // namespace gpureap
