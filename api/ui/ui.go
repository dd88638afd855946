// Package ui is budgetd's web UI: plain HTML, CSS and JavaScript modules,
// embedded into the binary. There is no build step, no CDN and no web font;
// the browser loads exactly the files in this directory, and they read the
// JSON API under api/v1/ relative to the page.
//
// The pages (problems, one problem, the service map, findings, paths,
// edges, one trace's budget waterfall) are rendered with DOM APIs only: data from spans never passes through an HTML
// parser, so a span name cannot inject markup.
package ui

import (
	"embed"
	"io/fs"
)

//go:embed index.html *.css *.js
var files embed.FS

// FS returns the UI's files: index.html and the assets it loads, at the root.
func FS() fs.FS { return files }
