#include "exporter/basic_auth.hpp"

#include <crypt.h>
#include <string.h>  // explicit_bzero

#include <array>
#include <cstring>
#include <memory>

namespace gpureap {
namespace {

constexpr std::size_t kMaxAuthorizationLength = 4096;

// -1 for a byte outside the standard base64 alphabet.
int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::optional<std::string> decode_base64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int padding = 0;
    unsigned bits = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      const char c = text[i + j];
      if (c == '=' && last && j >= 2 && (j == 3 || text[i + 3] == '=')) {
        ++padding;
        bits <<= 6;
        continue;
      }
      const int value = base64_value(c);
      if (value < 0 || padding > 0) return std::nullopt;
      bits = (bits << 6) | static_cast<unsigned>(value);
    }
    out += static_cast<char>((bits >> 16) & 0xFF);
    if (padding < 2) out += static_cast<char>((bits >> 8) & 0xFF);
    if (padding < 1) out += static_cast<char>(bits & 0xFF);
  }
  return out;
}

bool bcrypt_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '/';
}

// Salt and hash of a password nobody knows, verified for an unknown user (at the cost of the
// configured users' hashes) so that the answer takes as long as for a known one.
constexpr std::string_view kDummySaltAndHash = "abcdefghijklmnopqrstuuEH5OdZPFzNblV93eoLf7tClmoxDoce2";

}  // namespace

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return difference == 0;
}

std::optional<BasicCredentials> parse_basic_authorization(std::string_view header) {
  if (header.size() > kMaxAuthorizationLength) return std::nullopt;
  while (!header.empty() && header.front() == ' ') header.remove_prefix(1);
  constexpr std::string_view kScheme = "basic ";
  if (header.size() < kScheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    const char c = header[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != kScheme[i]) return std::nullopt;
  }
  std::string_view encoded = header.substr(kScheme.size());
  while (!encoded.empty() && encoded.front() == ' ') encoded.remove_prefix(1);
  while (!encoded.empty() && encoded.back() == ' ') encoded.remove_suffix(1);
  const auto decoded = decode_base64(encoded);
  if (!decoded) return std::nullopt;
  const std::size_t colon = decoded->find(':');
  if (colon == std::string::npos) return std::nullopt;
  return BasicCredentials{decoded->substr(0, colon), decoded->substr(colon + 1)};
}

bool bcrypt_hash_is_valid(std::string_view hash) {
  if (hash.size() != 60 || hash[0] != '$' || hash[1] != '2' || hash[3] != '$' || hash[6] != '$') return false;
  if (hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') return false;
  if (hash[4] < '0' || hash[4] > '9' || hash[5] < '0' || hash[5] > '9') return false;
  const int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  if (cost < 4 || cost > 31) return false;
  for (std::size_t i = 7; i < hash.size(); ++i) {
    if (!bcrypt_char(hash[i])) return false;
  }
  return true;
}

bool bcrypt_verify(std::string_view password, const std::string& hash) {
  // crypt_r's state is large (~32 KiB): on the heap, not a worker thread's stack.
  auto data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof(crypt_data));
  const std::string text(password);  // crypt_r needs a terminated string; a NUL cuts it as crypt does
  const char* computed = ::crypt_r(text.c_str(), hash.c_str(), data.get());
  // A hash crypt cannot use comes back as NULL or as "*0"/"*1": never equal to a real hash.
  return computed != nullptr && equal_in_constant_time(computed, hash);
}

BasicAuthenticator::BasicAuthenticator(std::map<std::string, std::string> users, Limits limits)
    : limits_(limits), users_(std::move(users)), turns_(limits.turns) {
  // The cost most users' hashes have (the lowest of equals): an unknown user then takes as long
  // as they do. Users whose hashes have other costs can be told from them by timing; the
  // web-config's documentation says to give every user the same cost.
  std::map<std::string, int> costs;
  for (const auto& [name, hash] : users_) {
    if (bcrypt_hash_is_valid(hash)) ++costs[hash.substr(4, 2)];
  }
  std::string cost = "10";
  int most = 0;
  for (const auto& [c, n] : costs) {
    if (n > most) {
      most = n;
      cost = c;
    }
  }
  dummy_hash_ = "$2y$" + cost + "$" + std::string(kDummySaltAndHash);
}

std::optional<bool> BasicAuthenticator::remembered(const CredentialDigest& key) {
  const std::lock_guard lock(cache_mutex_);
  if (const auto it = successes_.find(key); it != successes_.end()) {
    const auto now = Clock::now();
    if (now - it->second < limits_.success_lifetime) {
      it->second = now;
      return true;
    }
    successes_.erase(it);
    return std::nullopt;
  }
  if (failures_.count(key) != 0) return false;
  return std::nullopt;
}

void BasicAuthenticator::remember(const CredentialDigest& key, bool outcome) {
  const std::lock_guard lock(cache_mutex_);
  if (outcome) {
    if (successes_.size() >= kMaxRememberedSuccesses && successes_.count(key) == 0) {
      // Only right passwords get here: the least recently used one is forgotten.
      auto oldest = successes_.begin();
      for (auto it = successes_.begin(); it != successes_.end(); ++it) {
        if (it->second < oldest->second) oldest = it;
      }
      successes_.erase(oldest);
    }
    successes_[key] = Clock::now();
    return;
  }
  if (!failures_.insert(key).second) return;
  failure_order_.push_back(key);
  if (failure_order_.size() > kMaxRememberedFailures) {
    failures_.erase(failure_order_.front());
    failure_order_.pop_front();
  }
}

bool BasicAuthenticator::verify(const BasicCredentials& credentials) {
  const auto user = users_.find(credentials.user);
  ++bcrypt_runs_;
  return bcrypt_verify(credentials.password, user == users_.end() ? dummy_hash_ : user->second) && user != users_.end();
}

AuthDecision BasicAuthenticator::check(std::string_view authorization_header, std::string_view peer) {
  auto credentials = parse_basic_authorization(authorization_header);
  if (!credentials) return AuthDecision::kRefused;
  const CredentialDigest key = hasher_.digest(credentials->user, credentials->password);
  std::optional<bool> outcome = remembered(key);
  if (!outcome) {
    const auto turn = turns_.take(peer_group(peer), Clock::now() + limits_.max_wait);
    if (turn) {
      // Those that waited for the same credentials find the outcome the first one left.
      outcome = remembered(key);
      if (!outcome) {
        outcome = verify(*credentials);
        remember(key, *outcome);
      }
    }
  }
  explicit_bzero(credentials->password.data(), credentials->password.size());
  if (!outcome) {
    ++busy_answers_;
    return AuthDecision::kBusy;
  }
  return *outcome ? AuthDecision::kAllowed : AuthDecision::kRefused;
}

}  // namespace gpureap
