export { Channel, type ChannelOptions, type Handler } from './channel.js';
export { ControlServer, type ControlServerOptions } from './server.js';
