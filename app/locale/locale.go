// Package locale gives Fyne a parseable locale before it reads one. Fyne's
// lang package parses $LC_ALL/$LC_MESSAGES/$LANG at initialisation and logs
// an error for the POSIX locale ("C", the default on servers and in CI),
// which would clutter every headless verb's output. Go initialises packages
// in import-path order once their dependencies are ready, so this package,
// imported by main, runs before fyne.io/fyne/v2/lang.
package locale

import (
	"os"
	"strings"
)

func init() {
	for _, key := range []string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		v := os.Getenv(key)
		if v == "" {
			continue
		}
		base, _, _ := strings.Cut(v, ".")
		if base == "C" || base == "POSIX" {
			os.Setenv(key, "en_US.UTF-8")
		}
	}
}
