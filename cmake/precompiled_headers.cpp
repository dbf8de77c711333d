// The one source of the targets that only build a precompiled header (gpureap_pch_target in
// CMakeLists.txt): a static library needs a file to compile.
void gpureap_precompiled_headers_anchor() {}
