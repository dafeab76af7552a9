/** The control plane's method names; each message's payload type is named in its file (worker-messages.ts, client-messages.ts). */
export const Methods = {
  registerWorker: 'register-worker',
  heartbeat: 'heartbeat',
  taskStarted: 'task-started',
  taskFinished: 'task-finished',
  taskErred: 'task-erred',
  missingData: 'missing-data',
  whoHas: 'who-has',
  workerClosing: 'worker-closing',
  addKeys: 'add-keys',
  acquireReplicas: 'acquire-replicas',
  retire: 'retire',
  retired: 'retired',
  retireWorkers: 'retire-workers',
  computeTask: 'compute-task',
  releaseKeys: 'release-keys',
  cancelTask: 'cancel-task',
  /** Notification, scheduler → every other worker: WorkerRemovedParams. */
  workerRemoved: 'worker-removed',
  registerClient: 'register-client',
  submit: 'submit',
  release: 'release',
  keyReady: 'key-ready',
  keyErred: 'key-erred',
  /** Request, client → scheduler: ProgressParams of the client's tasks. */
  progress: 'progress',
  /** Request, client → scheduler: UploadModuleParams → UploadModuleResult. */
  uploadModule: 'upload-module',
  /** Notification, scheduler → worker: ShipModuleParams. */
  shipModule: 'ship-module',
  /** Notification, scheduler → worker: ForgetModuleParams. */
  forgetModule: 'forget-module',
} as const;
