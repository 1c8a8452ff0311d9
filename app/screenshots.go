package app

import (
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
)

// screenshots selects every tab of the real window in turn, captures the
// canvas as a PNG in dir, and quits: the review script's job
// (scripts/screenshots.sh runs it under Xvfb).
func screenshots(wb *Workbench, dir string) {
	time.Sleep(2 * time.Second) // let the window map and draw
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "screenshots:", err)
	}
	for i, tab := range wb.Tabs.Items {
		fyne.DoAndWait(func() { wb.Tabs.SelectIndex(i) })
		time.Sleep(1500 * time.Millisecond)
		done := make(chan struct{})
		fyne.Do(func() {
			defer close(done)
			shot := wb.Session.Win.Canvas().Capture()
			name := fmt.Sprintf("%d-%s.png", i+1, strings.ReplaceAll(strings.ToLower(tab.Text), " ", "-"))
			f, err := os.Create(filepath.Join(dir, name))
			if err != nil {
				fmt.Fprintln(os.Stderr, "screenshots:", err)
				return
			}
			png.Encode(f, shot)
			f.Close()
			fmt.Println("saved", filepath.Join(dir, name))
		})
		<-done
	}
	fyne.Do(func() { wb.Session.App.Quit() })
}
