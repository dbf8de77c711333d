// fmt compiled into gpureap, once: the other files include its declarations only (as with the
// shared libfmt), so the program needs no libfmt.so at start-up and no file but this one pays
// for compiling fmt's implementation. What format-inl.h defines as plain functions is compiled
// here; its templates that format.h declares `extern template` are instantiated below.
#include <fmt/format.h>
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;
template locale_ref::locale_ref(const std::locale& loc);
template auto locale_ref::get<std::locale>() const -> std::locale;  // chrono's formatter<tm>
}  // namespace detail
FMT_END_NAMESPACE
