package model

// SetMaxRows lowers the rows of one pass for tests of long batches.
func SetMaxRows(m *Model, n int) { m.maxRows = n }

// SetPassFault makes every sequence of p's passes attend with the first
// sequence's queries: the mistake the multi-sequence tests must catch.
func SetPassFault(p *Pass, on bool) { p.fault = on }
