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
// refresh (and an untracked Export reload's fyne.DoAndWait crashed it
// the same way). Session.UI and UIWait serialise them; only they (and
// the screenshot driver) call fyne.Do and fyne.DoAndWait.
func TestBackgroundWorkReportsThroughUI(t *testing.T) {
	allowed := map[string]int{"app.go": 1, "screenshots.go": 1}
	allowedWait := map[string]int{"app.go": 1, "screenshots.go": 22}
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
		// DoAndWait likewise (Session.UIWait), but for the screenshot
		// driver, which drives the window as a user does
		if n := strings.Count(string(src), "fyne.DoAndWait("); n > allowedWait[f] {
			t.Errorf("%s calls fyne.DoAndWait %d times (at most %d): read and report through Session.UIWait", f, n, allowedWait[f])
		}
	}
}
