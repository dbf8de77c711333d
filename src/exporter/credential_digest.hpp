// A keyed digest of a (user, password) pair, so that basic auth can remember outcomes without
// keeping any password: SipHash-2-4 (Aumasson and Bernstein's keyed hash for exactly this:
// table keys an attacker chooses) under two random keys drawn at start, 128 bits in all.
// Without the keys nobody can compute a digest, so none can be aimed at a remembered success.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace gpureap {

using CredentialDigest = std::array<std::uint64_t, 2>;

// SipHash-2-4 of `data` under the 128-bit key (k0, k1), as the reference implementation.
std::uint64_t siphash24(std::uint64_t k0, std::uint64_t k1, std::string_view data);

class CredentialHasher {
 public:
  CredentialHasher();  // keys from getrandom(2)
  CredentialDigest digest(std::string_view user, std::string_view password) const;

 private:
  std::array<std::uint64_t, 4> keys_{};
};

}  // namespace gpureap
