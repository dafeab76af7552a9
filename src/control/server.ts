import { EventEmitter } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import { Channel, type ChannelOptions } from './channel.js';

export interface ControlServerOptions extends Omit<ChannelOptions, 'tls'> {
  host?: string;
  port?: number;
  tls?: tls.TlsOptions;
}

/**
 * Accepts control channels. Emits 'channel' for each handshake that succeeds and
 * 'channel-error' (err, remote) for each that does not; a failed peer touches nothing else.
 */
export class ControlServer extends EventEmitter {
  readonly #server: net.Server;
  readonly #channels = new Set<Channel>();
  readonly #sockets = new Set<net.Socket>();

  private constructor(server: net.Server) {
    super();
    this.#server = server;
  }

  static listen(options: ControlServerOptions = {}): Promise<ControlServer> {
    const onSocket = (socket: net.Socket): void => {
      self.#sockets.add(socket);
      socket.once('close', () => self.#sockets.delete(socket));
      Channel.accept(socket, { token: options.token, timeoutMs: options.timeoutMs, maxFrameBytes: options.maxFrameBytes }).then(
        (channel) => {
          self.#channels.add(channel);
          channel.once('close', () => self.#channels.delete(channel));
          self.emit('channel', channel);
        },
        (err: unknown) => self.emit('channel-error', err, `${socket.remoteAddress}:${socket.remotePort}`),
      );
    };
    const server = options.tls === undefined ? net.createServer(onSocket) : tls.createServer(options.tls, onSocket);
    // A peer whose certificate does not verify (or that speaks no TLS) never becomes a channel.
    server.on('tlsClientError', (err: Error, socket: tls.TLSSocket) => self.emit('channel-error', err, `${socket.remoteAddress}:${socket.remotePort}`));
    const self = new ControlServer(server);
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
        server.off('error', reject);
        resolve(self);
      });
    });
  }

  get address(): { host: string; port: number } {
    const info = this.#server.address() as net.AddressInfo;
    return { host: info.address, port: info.port };
  }

  get channels(): ReadonlySet<Channel> {
    return this.#channels;
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const channel of this.#channels) channel.close();
    for (const socket of this.#sockets) socket.destroy();
    await closed;
  }
}
