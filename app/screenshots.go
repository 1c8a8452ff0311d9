package app

import (
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/software"
)

// screenshots selects every tab of the real window in turn, saves a PNG of
// it in dir, and quits: the review script's job
// (scripts/screenshots.sh runs it under Xvfb).
func screenshots(wb *Workbench, dir string) {
	time.Sleep(2 * time.Second) // let the window map and draw
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "screenshots:", err)
	}
	if size := os.Getenv("ARBORIST_SCREENSHOT_SIZE"); size != "" { // e.g. 1024x640
		var w, h float32
		if _, err := fmt.Sscanf(size, "%fx%f", &w, &h); err != nil || w < 100 || h < 100 {
			fmt.Fprintf(os.Stderr, "screenshots: ARBORIST_SCREENSHOT_SIZE %q is not WIDTHxHEIGHT\n", size)
		} else {
			fyne.DoAndWait(func() { wb.Session.Win.Resize(fyne.NewSize(w, h)) })
		}
	}
	prepare(wb)
	for i, tab := range wb.Tabs.Items {
		fyne.DoAndWait(func() { wb.Tabs.SelectIndex(i) })
		time.Sleep(1500 * time.Millisecond)
		done := make(chan struct{})
		fyne.Do(func() {
			defer close(done)
			// The GL canvas reads back blank under Xvfb's software GL, so
			// the window's widget tree is painted with Fyne's software
			// renderer at the window's size, then handed back.
			size := wb.Session.Win.Canvas().Size()
			c := software.NewCanvas()
			c.SetPadded(false)
			c.SetContent(wb.Root)
			c.Resize(size)
			shot := c.Capture()
			wb.Session.Win.SetContent(wb.Root)
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

// prepare fills the screens the way a user would before the captures: load
// the shared bench pair (or the demo pair), profile, calibrate and tune on
// the shared prompt suite, run twice, compare, export the tuned plan.
func prepare(wb *Workbench) {
	wait := func(cond func() bool) {
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			ok := false
			fyne.DoAndWait(func() { ok = cond() })
			if ok {
				return
			}
		}
	}
	m := wb.Models
	target := filepath.Join("..", "shared", "models", "stories260K.gguf")
	draft := filepath.Join("..", "shared", "models", "bench", "draft-noisy-0.05.gguf")
	if _, err := os.Stat(target); err != nil {
		fyne.DoAndWait(m.buildDemo)
		wait(func() bool {
			return strings.Contains(m.Status.Text, "ready") || strings.Contains(m.Status.Text, "failed")
		})
	} else {
		fyne.DoAndWait(func() { m.Target.SetText(target); m.Draft.SetText(draft) })
	}
	fyne.DoAndWait(m.load)
	wait(func() bool {
		return strings.Contains(m.Status.Text, "Loaded") || strings.Contains(m.Status.Text, "Not loaded")
	})
	p := wb.Profile
	fyne.DoAndWait(func() { p.MaxW.SetSelected("32"); p.start() })
	wait(func() bool { return !p.Start.Disabled() })
	sp := wb.Speedup
	prompts := filepath.Join("..", "shared", "prompts", "stories.txt")
	if _, err := os.Stat(prompts); err == nil {
		fyne.DoAndWait(func() { sp.Prompts.SetText(prompts); sp.CalTokens.SetText("32"); sp.calibrate() })
		wait(func() bool { return !sp.busy })
		fyne.DoAndWait(sp.tune)
		wait(func() bool { return !sp.busy })
	}
	fyne.DoAndWait(func() { sp.Update() })
	r := wb.Run
	for _, strat := range []string{"ar", "chain"} {
		fyne.DoAndWait(func() { r.Strategy.SetSelected(strat); r.Tokens.SetText("96"); r.run() })
		time.Sleep(100 * time.Millisecond)
		r.Wait()
		wait(func() bool { return !r.Start.Disabled() })
	}
	fyne.DoAndWait(func() {
		c := wb.Compare
		c.Refresh()
		for i := 0; i < len(c.Runs) && i < 2; i++ {
			c.Toggle(c.Runs[i].ID, true)
		}
		c.Table.Refresh()
	})
	wb.Export.Reload()
}
