// The one way text that came from outside gpureap reaches a terminal: command lines, comm,
// file and cgroup names, kernel-log lines, configuration values. A process may name itself
// "\e]0;pwned\a\e[2J" to retitle or clear root's terminal, or to redraw a kill plan above
// "Proceed? [y/N]"; after this function it is shown as inert, visible text.
//
// What is replaced, each escape standing for exactly the bytes it replaced, so that the output
// is unambiguous (it can be read back to the original bytes):
//   \\       a backslash (so that a literal "\x1b" in a name cannot pass for an escape)
//   \xHH     a C0 control byte 0x00-0x1F (ESC, BEL, CR, LF, TAB, ...), DEL 0x7F, and every byte
//            that is not part of valid UTF-8 (raw C1 bytes 0x80-0x9F, overlong forms,
//            surrogates, truncated sequences), one escape per byte
//   \uHHHH   a C1 control written as valid UTF-8 (U+0080-U+009F), and the characters that
//   \UHHHHHHHH  reorder or break lines without being controls, or show as nothing so that two
//            different names would look the same: U+2028, U+2029, every format character
//            (Unicode category Cf: the bidirectional marks, embeddings, overrides and isolates,
//            zero-width space U+200B, joiners U+200C/U+200D, word joiner U+2060, the byte order
//            mark U+FEFF, soft hyphen U+00AD, tags U+E0001-U+E007F, ...) and the Hangul
//            fillers that render blank (U+115F, U+1160, U+3164, U+FFA0)
// Everything else (printable ASCII, valid UTF-8) is kept as it is, except for a terminal whose
// locale is not UTF-8 (charset.hpp): there every byte above 0x7F is \xHH, so that nothing but
// ASCII reaches it (on an 8-bit terminal the byte 0x9B is CSI).
//
// JSON output does not use this: it keeps the exact bytes, escaped by the JSON library.
#pragma once

#include <string>
#include <string_view>

#include "text/charset.hpp"

namespace gpureap {

// For single-line fields: every control, newline and tab included, is escaped. For the
// terminal's character set (terminal_charset()), or the one given: metrics are UTF-8 whatever
// the locale of the exporter.
std::string sanitize_for_terminal(std::string_view text);
std::string sanitize_for_terminal(std::string_view text, Charset charset);

// The bytes sanitize_for_terminal was given, from what it returned: \\, \xHH and \uHHHH are
// undone; anything else (a backslash that begins none of them) is kept as it is. For text that
// comes already sanitised (the label values of gpureap's exporter, read back by fleet), so that
// it is shown sanitised once, not with every backslash doubled.
std::string unsanitize_terminal_text(std::string_view text);

// For text gpureap lays out over several lines itself (a finding's detail): '\n' is kept,
// everything else as sanitize_for_terminal.
std::string sanitize_lines_for_terminal(std::string_view text);

}  // namespace gpureap
