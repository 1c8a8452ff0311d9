package app

import (
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/software"

	"arborist/profiles"
)

// screenshots selects every tab of the real window in turn, saves a PNG of
// it in dir, and quits: the review script's job
// (scripts/screenshots.sh runs it under Xvfb).
func screenshots(wb *Workbench, dir string) {
	time.Sleep(2 * time.Second) // let the window map and draw
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "screenshots:", err)
	}
	var want fyne.Size                                             // the size asked for (zero: the window's)
	if size := os.Getenv("ARBORIST_SCREENSHOT_SIZE"); size != "" { // e.g. 1024x640
		var w, h float32
		if _, err := fmt.Sscanf(size, "%fx%f", &w, &h); err != nil || w < 100 || h < 100 {
			fmt.Fprintf(os.Stderr, "screenshots: ARBORIST_SCREENSHOT_SIZE %q is not WIDTHxHEIGHT\n", size)
		} else {
			want = fyne.NewSize(w, h)
			for try := 0; try < 10; try++ { // the first resize may come before the window is mapped
				var got, min fyne.Size
				fyne.DoAndWait(func() {
					wb.Session.Win.Resize(want)
					got, min = wb.Session.Win.Canvas().Size(), wb.Session.Win.Content().MinSize()
				})
				if got == want {
					break
				}
				fmt.Fprintf(os.Stderr, "screenshots: window %v, want %v (content needs %v)\n", got, want, min)
				time.Sleep(500 * time.Millisecond)
			}
		}
	}
	prepare(wb)
	for i, tab := range wb.Tabs.Items {
		fyne.DoAndWait(func() { wb.Tabs.SelectIndex(i) })
		time.Sleep(1500 * time.Millisecond)
		name := strings.ReplaceAll(strings.ToLower(tab.Text), " ", "-")
		if tab.Text == wb.Speedup.Title() {
			fyne.DoAndWait(func() { showTip(wb) })
			capture(wb, dir, want, fmt.Sprintf("%d-%s.png", i+1, name))
			// the controls column whole, as if scrolled through: the
			// validation's table sits below its fold
			sp := wb.Speedup
			capture(wb, dir, want, fmt.Sprintf("%d-%s-controls.png", i+1, name), sp.controls.Content)
			continue
		}
		capture(wb, dir, want, fmt.Sprintf("%d-%s.png", i+1, name))
		if tab.Text == wb.Profile.Title() { // and the speed at depth in the lower half
			fyne.DoAndWait(func() { wb.Profile.Lower.SelectIndex(1) })
			time.Sleep(500 * time.Millisecond)
			capture(wb, dir, want, fmt.Sprintf("%d-%s-depth.png", i+1, name))
			fyne.DoAndWait(func() { wb.Profile.Lower.SelectIndex(0) })
		}
	}
	fyne.Do(func() { wb.Session.App.Quit() })
}

// capture paints the window's content into dir/name; with part, that
// object alone, at its own width and as tall as it needs.
func capture(wb *Workbench, dir string, want fyne.Size, name string, part ...fyne.CanvasObject) {
	fyne.DoAndWait(func() {
		// The GL canvas reads back blank under Xvfb's software GL, so the
		// window's widget tree is painted with Fyne's software renderer at
		// the window's size, then handed back.
		size := wb.Session.Win.Canvas().Size()
		if want.Width > 0 && size != want {
			fmt.Fprintf(os.Stderr, "screenshots: the window is %v, painting at %v\n", size, want)
			size = want
		}
		root := wb.Root
		if len(part) > 0 {
			root = part[0]
			size = fyne.NewSize(root.Size().Width, root.MinSize().Height)
		}
		shot := paint(root, size)
		wb.Session.Win.SetContent(wb.Root)
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			fmt.Fprintln(os.Stderr, "screenshots:", err)
			return
		}
		png.Encode(f, shot)
		f.Close()
		fmt.Println("saved", filepath.Join(dir, name))
	})
}

// paint draws root at size with Fyne's software renderer. The canvas
// takes its size before its content: given the content first, it lays it
// out at its minimum size, where every wrapped label wraps into a narrow
// column and asks for many lines, and the boxes above them keep those
// lines' height as empty gaps once the canvas grows to size.
func paint(root fyne.CanvasObject, size fyne.Size) image.Image {
	c := software.NewCanvas()
	c.SetPadded(false)
	c.Resize(size)
	c.SetContent(root)
	return c.Capture()
}

// prepare fills the screens the way a user would before the captures:
// load the pair (ARBORIST_SCREENSHOT_TARGET and _DRAFT, else the demo pair
// built on the Models screen), profile, measure the speed at depth, calibrate (once per database) and
// tune on the shared prompt suite, validate its top 5, run plain decoding
// once for Compare, run the tuned plan against plain decoding (its figures
// are printed), compare, export, and show a point's values on the speedup
// chart.
func prepare(wb *Workbench) {
	wait := func(cond func() bool) {
		for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			ok := false
			fyne.DoAndWait(func() { ok = cond() })
			if ok {
				return
			}
		}
		fmt.Fprintln(os.Stderr, "screenshots: a step timed out")
	}
	m := wb.Models
	target, draft := os.Getenv("ARBORIST_SCREENSHOT_TARGET"), os.Getenv("ARBORIST_SCREENSHOT_DRAFT")
	if target == "" {
		fyne.DoAndWait(m.buildDemo)
		wait(func() bool {
			return strings.Contains(m.Status.Text, "ready") || strings.Contains(m.Status.Text, "failed")
		})
	} else {
		fyne.DoAndWait(func() { m.Target.SetText(target); m.Draft.SetText(draft); m.Source.SetSelected(SourceModel) })
	}
	fyne.DoAndWait(m.load)
	wait(func() bool { // loaded, and its stored results shown
		return !m.Load.Disabled() && (wb.Session.State != nil || strings.Contains(m.Status.Text, "Not loaded") || strings.Contains(m.Status.Text, "could not"))
	})
	p := wb.Profile
	fyne.DoAndWait(func() { p.MaxW.SetSelected("32"); p.start() })
	wait(func() bool { return !p.Start.Disabled() })
	wait(func() bool { return p.Depth.Contexts.Text != "" }) // the target's default depths
	fyne.DoAndWait(p.Depth.start)
	wait(func() bool { return !p.Depth.Start.Disabled() })
	wb.Guide.Reload()
	var done profiles.Steps
	fyne.DoAndWait(func() { done = wb.Guide.steps })
	sp := wb.Speedup
	prompts := os.Getenv("ARBORIST_SCREENSHOT_PROMPTS")
	if prompts == "" {
		prompts = filepath.Join("..", "shared", "prompts", "stories.txt")
	}
	if _, err := os.Stat(prompts); err == nil {
		fyne.DoAndWait(func() { sp.Prompts.SetText(prompts); sp.CalTokens.SetText("32") })
		if !done.Calibrated {
			fyne.DoAndWait(sp.calibrate)
			wait(func() bool { return !sp.busy })
		}
	}
	fyne.DoAndWait(sp.tune)
	wait(func() bool { return !sp.busy })
	// validate the top 5 as a user checks a tune (it picks the measured best)
	fyne.DoAndWait(sp.validate)
	wait(func() bool { return !sp.busy })
	fyne.DoAndWait(func() { sp.Update() })
	r := wb.Run
	run := func(set func()) {
		fyne.DoAndWait(func() { set(); r.run() })
		time.Sleep(100 * time.Millisecond)
		r.Wait()
		wait(func() bool { return !r.Start.Disabled() })
	}
	if done.Runs == 0 {
		run(func() {
			r.Strategy.SetSelected(profiles.Choices().PlainStrategy)
			r.Tokens.SetText("64")
			r.Baseline.SetChecked(false)
		})
	}
	run(func() { r.useTuned(); r.Tokens.SetText("256"); r.Baseline.SetChecked(true) })
	fyne.DoAndWait(func() { fmt.Println("run:", r.Stats.Text) })
	fyne.DoAndWait(func() {
		c := wb.Compare
		c.Refresh()
		// the newest run, a plain decoding run and the validated plans:
		// like with like, each plan once
		plans := map[string]bool{}
		for i, run := range c.Runs {
			p := runPlan(run)
			if (i == 0 || run.Plain() || len(plans) < 4) && !plans[p] {
				plans[p] = true
				c.Toggle(run.ID, true)
			}
		}
		c.Table.Refresh()
	})
	wb.Export.Reload()
	fyne.DoAndWait(func() {
		if err := wb.Export.SaveTo(filepath.Join(os.TempDir(), "arborist-screenshot-config.yaml")); err != nil {
			fmt.Fprintln(os.Stderr, "screenshots: export:", err)
		}
	})
	wb.Guide.Reload()
}

// showTip shows the values of the best point of the speedup chart, as a
// hover does, so the captures show that the charts answer.
func showTip(wb *Workbench) {
	c := wb.Speedup.Chart
	var best ChartPoint
	for _, pt := range c.Points() {
		if pt.Y > best.Y {
			best = pt
		}
	}
	if best.Y > 0 {
		c.ShowTipAt(c.PointPos(best))
	}
}
