#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

// Text that people see: what may go into names and reasons, and how untrusted text is shown on
// a terminal. Names are shown in every listing, to every user and admin, so they may hold no
// character that moves the cursor, changes the terminal, hides itself or reorders what follows
// (a right-to-left override, U+202E, makes "job<U+202E>gnp.exe" read as "jobexe.png"). Pure
// functions; input is UTF-8 (the JSON reader refuses anything else).
namespace gpool::api {

// The first character of `text` that may not appear in a name, as "U+202E", or "" when there
// is none: C0 and C1 control characters, DEL, and the invisible and direction-changing format
// characters (U+061C, U+200B, U+200E-U+200F, U+2028-U+202E, U+2060-U+2064, U+2066-U+206F, U+FEFF,
// U+FFF9-U+FFFB, the tag characters U+E0000-U+E007F). Bytes that are not UTF-8 count as U+FFFD
// and are refused too.
std::string firstUnsafeChar(std::string_view text);

// OK, or InvalidArgument "<field>: contains U+202E (a control or invisible formatting
// character), which names may not hold".
Status validateDisplayText(std::string_view text, std::string_view field);

// `text` made safe to print on a terminal: each character firstUnsafeChar refuses is written
// as an escape instead: \n \r \t \e \a \b, \xHH for other C0/C1 controls and DEL and bytes that
// are not UTF-8, \uHHHH (\UHHHHHHHH beyond U+FFFF) for the format characters: the escapes of C
// and of bash's $'...'. Everything else (backslashes included) is kept as is.
std::string escapeForTerminal(std::string_view text);

}  // namespace gpool::api
