#include "text/terminal_width.hpp"

#include <gtest/gtest.h>

#include "text/terminal_style.hpp"
#include "text/truncate.hpp"

namespace gpureap {
namespace {

TEST(TextTerminalWidth, UnlimitedKeepsTheWholeTextSanitised) {
  const std::string command(500, 'x');
  EXPECT_EQ(OutputWidth::unlimited().rest_of_line(command, "  1234 "), command);
  EXPECT_EQ(OutputWidth::unlimited().rest_of_line("a\x1b[2Jb", ""), "a\\x1b[2Jb");
}

TEST(TextTerminalWidth, CutsToWhatTheLineLeaves) {
  const OutputWidth width(std::size_t{30});
  const std::string start = "  1234 root ";  // 12 columns
  const std::string cut = width.rest_of_line("python train.py --epochs 100", start);
  EXPECT_EQ(cut, "python train.py -…");
  EXPECT_EQ(display_width(start + cut), 30u);
  // Colour codes take no columns.
  const TerminalStyle colour(true);
  EXPECT_EQ(width.rest_of_line("python train.py --epochs 100", colour.red(start)), "python train.py -…");
}

TEST(TextTerminalWidth, KeepsAMinimumWhenTheLineIsAlreadyFull) {
  const OutputWidth width(std::size_t{10});
  const std::string cut = width.rest_of_line(std::string(40, 'y'), std::string(30, ' '));
  EXPECT_EQ(display_width(cut), OutputWidth::kMinimumColumns);
}

TEST(TextTerminalWidth, NotATerminalIsUnlimitedEvenWithColumns) {
  setenv("COLUMNS", "40", 1);
  EXPECT_FALSE(OutputWidth::for_fd(-1, false).columns());
  EXPECT_FALSE(OutputWidth::for_fd(-1, true).columns());
  unsetenv("COLUMNS");
}

TEST(TextTerminalWidth, FixedCellIsSanitisedCutAndPadded) {
  EXPECT_EQ(fixed_cell("root", 6), "root  ");
  EXPECT_EQ(fixed_cell("a-very-long-user", 6), "a-ver…");
  EXPECT_EQ(fixed_cell("学生学生", 5), "学生…");
  EXPECT_EQ(fixed_cell("学生学生", 6), "学生… ");  // a wide char that does not fit leaves a space
  EXPECT_EQ(fixed_cell("\x1b", 6), "\\x1b  ");
}

TEST(TextTerminalWidth, VisibleWidthSkipsColourCodes) {
  const TerminalStyle colour(true);
  EXPECT_EQ(visible_width(colour.bold(colour.red("abc")) + "学"), 5u);
}

}  // namespace
}  // namespace gpureap
