package model

// SetMaxRows lowers the rows of one pass for tests of long batches.
func SetMaxRows(m *Model, n int) { m.maxRows = n }
