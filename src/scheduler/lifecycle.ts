/** Whether the scheduler is closing: its connections and its HTTP health check read it. */
export class SchedulerLifecycle {
  closed = false;
}
