# SPDX-License-Identifier: BSD-3-Clause
# Doxygen input filter for the public headers. Their comments are plain C
# comments in the SQLite manner (a comment before a declaration documents
# it; a comment after a field documents the field); this makes them
# Doxygen's without changing the headers.
# The license line and the section rules are not documentation.
/^\/\* SPDX-License-Identifier/s|.*||
/\/\* clang-format o[nf]* \*\//s|.*||
# A section's title, boxed by rules, stays a plain comment: it names the
# section, it documents nothing. (Lines are blanked, not deleted, so that
# Doxygen's line numbers are the header's.)
/^\/\* -\{8,\} \*\/$/{
  s/.*//
  :title
  n
  /^\/\* -\{8,\} \*\/$/{
    s/.*//
    b
  }
  /^\/\*.*\*\/$/b title
}
# The header's opening comment describes the file.
2s|^/\*$|/** @file|
# A comment that starts a line documents what follows it.
s|^\([[:space:]]*\)/\*\([[:space:]]\)|\1/**\2|
s|^\([[:space:]]*\)/\*$|\1/**|
# A comment after code on the same line documents that line's member.
s|\([;,{]\)\([[:space:]]*\)/\*\([[:space:]]\)|\1\2/**<\3|
