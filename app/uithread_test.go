package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackgroundWorkReportsThroughUI holds the screens' background work to
// Session.UI: under Fyne's test driver fyne.Do runs its function on the
// goroutine that asked, so two jobs reporting through fyne.Do directly
// (the start-up backends' check and the restored pair's read, say)
// redrew the same labels at once and crashed make test in Fyne's text
// refresh. Session.UI serialises them; only it (and the screenshot
// driver, which quits the app) call fyne.Do.
func TestBackgroundWorkReportsThroughUI(t *testing.T) {
	allowed := map[string]int{"app.go": 1, "screenshots.go": 1}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(src), "fyne.Do("); n > allowed[f] {
			t.Errorf("%s calls fyne.Do %d times (at most %d): report through Session.UI, which runs one update at a time", f, n, allowed[f])
		}
	}
}
