// Loses one allocation and exits 0. Under LeakSanitizer's check at exit it fails instead and
// reports the leak: the LeakChecks suite's proof of which programs it starts are checked.
#include <cstring>

namespace {

// Not inlined: the block's address leaves no copy in main's frame.
[[gnu::noinline]] void lose_a_block() {
  char* block = new char[64];
  std::memset(block, 1, 64);
}

}  // namespace

int main() {
  lose_a_block();
  return 0;
}
