// Package assets holds the files embedded in the Arborist binary: the
// application icon and the built-in prompt suites.
package assets

import _ "embed"

// Icon is the application icon (256x256 PNG).
//
//go:embed icon.png
var Icon []byte
