package report

import "html/template"

// page is the whole document. No script and nothing loaded: the styles are
// here, system fonts only.
var page = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 20px; margin: 0 0 12px; }
h2 { font-size: 16px; margin: 24px 0 8px; border-bottom: 1px solid #ddd; }
h3 { font-size: 14px; margin: 16px 0 6px; }
.headline { display: flex; flex-wrap: wrap; gap: 12px; margin: 8px 0; }
.fact { border: 1px solid #ccc; border-radius: 6px; padding: 8px 12px; min-width: 140px; }
.fact .label { color: #666; font-size: 12px; }
.fact .v { font-size: 20px; font-weight: 600; }
.fact.bad { border-color: #c62828; }
.fact.bad .v { color: #c62828; }
.line { font-family: ui-monospace, monospace; font-size: 12px; color: #444; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
table { border-collapse: collapse; }
td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: right; font-variant-numeric: tabular-nums; }
th:first-child, td:first-child { text-align: left; }
.warnings li { color: #8a5a00; }
.side { display: flex; flex-wrap: wrap; gap: 24px; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{if .Compare}}
<h2>Forms side by side (warm medians)</h2>
{{.Side}}
<table id="compare">
<tr><th>median (ratio to {{index .Table.Forms 0}})</th>{{range .Table.Forms}}<th>{{.}}</th>{{end}}</tr>
{{range .Table.Rows}}<tr><td>{{.Name}}</td>{{range .Cells}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{end}}
{{range .Forms}}
<section class="form" data-form="{{.R.Form}}">
<h2>{{.R.Model}} {{.R.Form}}: {{.Shape}}, device {{.R.Device}}</h2>
<div class="headline">
{{range .Facts}}<div class="fact{{if .Bad}} bad{{end}}"><div class="label">{{.Label}}</div><div class="v" data-field="{{.Field}}" data-value="{{.Value}}">{{.Text}}</div></div>
{{end}}</div>
<p class="line">{{.Headline}}</p>
{{if .Warm}}<h3>Warm passes: phases per pass (host time; the cold passes below are on the same scale)</h3>{{.Warm}}{{end}}
{{if .Cold}}<h3>Cold passes (first of each rank): phases per pass (host time, the warm passes' scale)</h3>{{.Cold}}{{end}}
{{if .Timeline}}<h3>Device timeline (simulated) of rank {{.R.Timeline.Rank}} round {{.R.Timeline.Round}}{{if .R.Timeline.Median}}, the median of its {{.R.Timeline.Of}} warm passes by device time{{end}}: {{.TimelineSlices}} on {{.TimelineCores}}, coloured by Graph key</h3>
<p class="idle" data-field="device_idle_ns" data-value="{{.R.Timeline.IdleNs}}">device idle before the pass (the device waiting for the host): {{.TimelineIdle}}; device wall {{.TimelineWall}} simulated.</p>{{.Timeline}}
{{else}}<p class="notimeline">{{.NoTimeline}}</p>{{end}}
{{if .Alive}}<h3>Definitions alive over rounds (rank 0)</h3>{{.Alive}}{{end}}
<h3>Counts</h3>
<table class="counts">
{{range .Counts}}<tr><td>{{.Label}}</td><td data-field="{{.Field}}" data-value="{{.Value}}">{{.Text}}</td></tr>
{{end}}</table>
{{if .R.Races}}<h3>Races</h3><ul class="races">{{range .R.Races}}<li>{{.Text}}</li>{{end}}</ul>{{end}}
<h3>Warnings</h3>
{{if .R.Warnings}}<ul class="warnings">{{range .R.Warnings}}<li>{{.}}</li>{{end}}</ul>{{else}}<p>None.</p>{{end}}
</section>
{{end}}
</body>
</html>
`))
