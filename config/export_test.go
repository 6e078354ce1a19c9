package config

// SizeAndRun is, for the tests of package config_test, the sizer's count
// of one pass of form (tasks, work) beside the runner's own count of what
// it did when it ran the pass on the ordinary path (Validate's counter).
func SizeAndRun(m *Model, form string) (size, ran [2]int64, sizeErr, runErr error) {
	f := m.formIdx[form]
	if f == nil {
		return size, ran, ErrNoForm, ErrNoForm
	}
	sc, sizeErr := m.sizeCost(f, m.MaxTasks())
	rc, runErr := m.run(newCounter(m), form)
	return [2]int64{sc.tasks, sc.work}, [2]int64{rc.tasks, rc.work}, sizeErr, runErr
}
