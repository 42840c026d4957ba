// Package browser opens kubeprop's timeline pages in headless Chromium
// (through chromedp): the tests check that a page fits its window and
// shows a failure's evidence, and make demo saves a screenshot of each.
//
// Chromium is found as $KUBEPROP_CHROMIUM, else chromium, chromium-browser
// or google-chrome on the PATH; Debian's package is chromium
// (apt-get install chromium), which .ci/run installs.
package browser
