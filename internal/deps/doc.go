// Package deps holds the test that keeps firstword's imports flowing one
// way (see docs/architecture.md). It has no code of its own.
package deps
