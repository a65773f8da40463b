// SPDX-License-Identifier: MIT
//
// A C++ program against an installed libweft, from <weft/weft.h> alone:
// every public header parses as C++, and the functions it calls link
// (extern "C" throughout, or they would be looked for mangled).  Prints
// "ok" when the library's version is the headers' and the probe's names
// come back.  Built by tools/install-test.sh with pkg-config, where a C++
// compiler is installed.
#include <cstdio>
#include <cstring>

#include <weft/weft.h>

int main()
{
	if (weft_version() != WEFT_VERSION_HEX) {
		std::fprintf(stderr, "library and headers differ in version\n");
		return 1;
	}
	if (std::strcmp(weft_event_kind_name(WEFT_EV_POLL), "poll") != 0) {
		std::fprintf(stderr, "weft_event_kind_name(POLL) is %s\n",
			     weft_event_kind_name(WEFT_EV_POLL));
		return 1;
	}
	if (weft_probe_listening()) {
		std::fprintf(stderr, "the probe listens, with nobody\n");
		return 1;
	}
	std::printf("ok\n");
	return 0;
}
