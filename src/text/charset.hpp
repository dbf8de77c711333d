// The character set of the person's terminal, and gpureap's own text written in it. A terminal
// whose locale is not UTF-8 (LC_ALL=C, a Latin-1 locale, a serial console) shows UTF-8 bytes as
// mojibake, and on an 8-bit terminal the byte 0x9B is CSI: there gpureap writes ASCII only.
// Text from outside gpureap has every non-ASCII byte escaped by the sanitiser (sanitize.hpp);
// gpureap's own glyphs (· █ ° … └─) become ASCII equivalents here. JSON and metrics do not use
// this: they are UTF-8 whatever the locale.
#pragma once

#include <string>
#include <string_view>

namespace gpureap {

enum class Charset { Utf8, Ascii };

// The codeset of LC_CTYPE as the environment sets it (LC_ALL, else LC_CTYPE, else LANG), read
// once without changing the process's locale: Utf8 for a UTF-8 locale (or one whose name says
// UTF-8 when this host lacks its data), Ascii for anything else, "C" and "POSIX" included.
Charset terminal_charset();

// The same decision for a given locale name ("" and "C": Ascii); what terminal_charset uses.
Charset charset_of_locale(std::string_view name);

// gpureap's own text for a terminal in `charset`: unchanged for Utf8; for Ascii each glyph
// gpureap draws becomes an ASCII stand-in ("·" "|", "█" "#", "°C" "C", "└─" "`-", "→" ">",
// "…" "...": the one that is wider; text cut to a width ends in ellipsis() instead) and any
// other non-ASCII byte \xHH, so that no byte above 0x7F is ever written. Give it text whose
// untrusted parts are already sanitised.
std::string in_charset(std::string_view text, Charset charset);

// The ellipsis that marks cut text: "…" (one column) or "..." (three).
std::string_view ellipsis(Charset charset);

}  // namespace gpureap
