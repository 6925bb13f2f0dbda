package soak

import (
	"fmt"
	"image"
	"image/color"
	"io"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The PNG's size in pixels.
const (
	PlotWidth  = 1200
	PlotHeight = 1500
)

// Plot draws the samples as a PNG of PlotWidth × PlotHeight pixels: five
// panels over the run's time (memory, goroutines, open FDs, p50 and p99
// latency, requests per second with the 5xx among them), each with the end
// of the warm-up and the quarters the verdict compares marked, and the
// verdict in the title.
func Plot(w io.Writer, samples []Sample, v Verdict) error {
	if len(samples) == 0 {
		return fmt.Errorf("plot: no samples")
	}
	// Minutes for runs of five minutes and more, seconds below.
	unit, unitName := time.Second, "s"
	if samples[len(samples)-1].Elapsed >= 5*time.Minute {
		unit, unitName = time.Minute, "min"
	}
	x := func(s Sample) float64 { return float64(s.Elapsed) / float64(unit) }
	series := func(get func(i int, s Sample) (float64, bool)) plotter.XYs {
		var xy plotter.XYs
		for i, s := range samples {
			if y, ok := get(i, s); ok {
				xy = append(xy, plotter.XY{X: x(s), Y: y})
			}
		}
		return xy
	}
	const mib = 1 << 20
	verdict := "not flat"
	switch {
	case v.Pass:
		verdict = "flat, pass"
	case v.Flat:
		verdict = "flat, errors: fail"
	}
	panels := []struct {
		title, ylabel string
		lines         []line
	}{
		{fmt.Sprintf("Clearance soak: %s (%d samples, %v)", verdict, len(samples), samples[len(samples)-1].Elapsed.Round(time.Second)),
			"memory (MiB)", []line{
				{"RSS", series(func(_ int, s Sample) (float64, bool) { return float64(s.RSS) / mib, true })},
				{"Go heap in use", series(func(_ int, s Sample) (float64, bool) { return float64(s.HeapInuse) / mib, true })},
				{"Go runtime from the OS", series(func(_ int, s Sample) (float64, bool) { return float64(s.GoSys) / mib, true })},
				{"store caches (Pebble)", series(func(_ int, s Sample) (float64, bool) { return float64(s.StoreCache) / mib, true })},
				{"RSS but store caches", series(func(_ int, s Sample) (float64, bool) { return float64(s.RSS-s.StoreCache) / mib, true })},
			}},
		{"", "goroutines", []line{
			{"goroutines", series(func(_ int, s Sample) (float64, bool) { return float64(s.Goroutines), true })},
		}},
		{"", "open file descriptors", []line{
			{"open FDs", series(func(_ int, s Sample) (float64, bool) { return float64(s.FDs), true })},
			{"of which table files (*.sst)", series(func(_ int, s Sample) (float64, bool) { return float64(s.TableFDs), true })},
		}},
		{"", "latency (ms)", []line{
			{"p50", series(func(_ int, s Sample) (float64, bool) { return s.P50.Seconds() * 1e3, s.P50 >= 0 && s.Requests > 0 })},
			{"p99", series(func(_ int, s Sample) (float64, bool) { return s.P99.Seconds() * 1e3, s.P99 >= 0 && s.Requests > 0 })},
		}},
		{"", "requests per second", []line{
			{"requests/s", series(func(i int, _ Sample) (float64, bool) { return rateAt(samples, i) })},
			{"5xx/s", series(func(i int, _ Sample) (float64, bool) { return errRateAt(samples, i) })},
		}},
	}
	marks := v.marks(samples)
	for i := range marks {
		marks[i] /= float64(unit)
	}
	plots := make([][]*plot.Plot, len(panels))
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.Y.Label.Text = pn.ylabel
		p.Y.Min = 0
		// Every panel spans the whole run, so that they line up.
		p.X.Min, p.X.Max = 0, x(samples[len(samples)-1])
		p.X.Label.Text = "time since the load started (" + unitName + ")"
		if i == len(panels)-1 {
			p.X.Label.Text += "; dashed: the end of the warm-up and the quarters (the verdict compares the 2nd with the 4th)"
		}
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.XOffs = vg.Points(12)
		p.Add(plotter.NewGrid(), vmarks(marks))
		for j, l := range pn.lines {
			if len(l.xy) == 0 {
				continue
			}
			ln, err := plotter.NewLine(l.xy)
			if err != nil {
				return fmt.Errorf("plot %s: %w", l.name, err)
			}
			ln.Color = palette[j%len(palette)]
			ln.Width = vg.Points(1.5)
			p.Add(ln)
			p.Legend.Add(l.name, ln)
		}
		plots[i] = []*plot.Plot{p}
	}
	img := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, PlotWidth, PlotHeight))))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 3 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

type line struct {
	name string
	xy   plotter.XYs
}

// palette has a color for each line of the busiest panel (memory: five).
var palette = []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}}

// rateAt is the i-th interval's requests per second; none for the first
// sample, which ends no interval.
func rateAt(s []Sample, i int) (float64, bool) {
	if i == 0 {
		return 0, false
	}
	return s[i].Rate(s[i-1]), true
}

// errRateAt is the i-th interval's 5xx per second.
func errRateAt(s []Sample, i int) (float64, bool) {
	if i == 0 {
		return 0, false
	}
	d := (s[i].Elapsed - s[i-1].Elapsed).Seconds()
	if d <= 0 {
		return 0, true
	}
	return float64(s[i].Errors5xx) / d, true
}

// marks are the times (in nanoseconds) the verdict's quarters begin, the
// first being the end of the warm-up, and the run's end.
func (v Verdict) marks(samples []Sample) []float64 {
	var judged []Sample
	for _, s := range samples {
		if s.Elapsed >= v.Warmup {
			judged = append(judged, s)
		}
	}
	if len(judged) < minJudged {
		return []float64{float64(v.Warmup)}
	}
	var m []float64
	for k := range 4 {
		m = append(m, float64(quarter(judged, k)[0].Elapsed))
	}
	return m
}

// vmarks draws dashed vertical lines across a panel at the given x.
type vmarks []float64

func (m vmarks) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	style := draw.LineStyle{Color: color.Gray{Y: 0x80}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	for _, x := range m {
		if x < p.X.Min || x > p.X.Max {
			continue
		}
		c.StrokeLine2(style, trX(x), c.Min.Y, trX(x), c.Max.Y)
	}
}
