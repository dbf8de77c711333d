#include "kill/toml_nesting.hpp"

#include <vector>

namespace gpureap {
namespace {

class NestingScan {
 public:
  NestingScan(std::string_view text, int limit) : text_(text), limit_(limit) {}

  std::optional<TomlPosition> run() {
    while (pos_ < text_.size() && !too_deep_) step();
    if (too_deep_) return where_;
    return std::nullopt;
  }

 private:
  // A level is one table (a header's or a key's segment) or one array or inline table.
  struct Frame {
    int depth;        // the depth of the container that held it
    int value_depth;  // the depth a value inside it starts at
    char kind;        // '[' or '{'
  };
  enum class Context { Key, Value };

  char at(std::size_t i) const { return i < text_.size() ? text_[i] : '\0'; }

  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      line_start_ = pos_ + 1;
    }
    ++pos_;
  }

  void check(int depth) {
    if (depth <= limit_ || too_deep_) return;
    too_deep_ = true;
    where_ = TomlPosition{line_, pos_ - line_start_ + 1};
  }

  void skip_comment() {
    while (pos_ < text_.size() && text_[pos_] != '\n') advance();
  }

  // A basic ("...", """...""") or literal ('...', '''...''') string; an unterminated one ends
  // the scan's interest at the end of its line (or the text), as toml++ will refuse it.
  void skip_string() {
    const char quote = text_[pos_];
    const bool triple = at(pos_ + 1) == quote && at(pos_ + 2) == quote;
    for (int i = 0; i < (triple ? 3 : 1); ++i) advance();
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\\' && quote == '"') {
        advance();
        if (pos_ < text_.size()) advance();
        continue;
      }
      if (c == '\n' && !triple) return;
      if (c == quote && (!triple || (at(pos_ + 1) == quote && at(pos_ + 2) == quote))) {
        for (int i = 0; i < (triple ? 3 : 1); ++i) advance();
        return;
      }
      advance();
    }
  }

  // [a.b."c.d"] or [[a.b]]: its segments are the depth of the keys under it.
  void read_header() {
    advance();
    if (at(pos_) == '[') advance();
    int segments = 1;
    while (pos_ < text_.size() && text_[pos_] != ']' && text_[pos_] != '\n') {
      const char c = text_[pos_];
      if (c == '"' || c == '\'') {
        skip_string();
        continue;
      }
      if (c == '.') check(++segments);
      if (too_deep_) return;
      advance();
    }
    while (at(pos_) == ']') advance();
    header_depth_ = segments;
    depth_ = segments;
  }

  void start_key() {
    context_ = Context::Key;
    key_segments_ = 0;
  }

  void open(char kind) {
    frames_.push_back(Frame{depth_, value_depth_, kind});
    depth_ = value_depth_ + 1;
    check(depth_);
    if (kind == '{') {
      start_key();
    } else {
      value_depth_ = depth_;
    }
  }

  void close() {
    if (frames_.empty()) return;  // unbalanced: toml++ says where
    depth_ = frames_.back().depth;
    value_depth_ = frames_.back().value_depth;
    frames_.pop_back();
    context_ = Context::Value;
  }

  void step() {
    const char c = text_[pos_];
    if (c == '#') return skip_comment();
    if (c == '"' || c == '\'') {
      if (context_ == Context::Key && key_segments_ == 0) check(depth_ + (key_segments_ = 1));
      return skip_string();
    }
    if (c == '\n' && frames_.empty()) {
      depth_ = header_depth_;
      start_key();
      return advance();
    }
    if (context_ == Context::Key) {
      if (c == '[' && frames_.empty() && key_segments_ == 0) return read_header();
      if (c == '.') {
        check(depth_ + ++key_segments_);
      } else if (c == '=') {
        value_depth_ = depth_ + key_segments_;
        context_ = Context::Value;
      } else if (c == '}') {
        close();
      } else if (c != ' ' && c != '\t' && c != '\r' && c != '\n' && key_segments_ == 0) {
        check(depth_ + (key_segments_ = 1));
      }
      return advance();
    }
    if (c == '[' || c == '{') {
      open(c);
    } else if (c == ']' || c == '}') {
      close();
    } else if (c == ',' && !frames_.empty() && frames_.back().kind == '{') {
      start_key();
    }
    advance();
  }

  std::string_view text_;
  int limit_;
  std::size_t pos_ = 0;
  std::size_t line_ = 1;
  std::size_t line_start_ = 0;
  Context context_ = Context::Key;
  int header_depth_ = 0;
  int depth_ = 0;
  int value_depth_ = 0;
  int key_segments_ = 0;
  std::vector<Frame> frames_;  // never deeper than the limit: the scan stops past it
  bool too_deep_ = false;
  TomlPosition where_;
};

}  // namespace

std::optional<TomlPosition> toml_too_deep(std::string_view text, int limit) {
  return NestingScan(text, limit).run();
}

}  // namespace gpureap
