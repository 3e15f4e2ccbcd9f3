#ifndef SIMP_CRABBITMQ_SHIM_H
#define SIMP_CRABBITMQ_SHIM_H
// librabbitmq 0.12 moved its headers under rabbitmq-c/ (the old paths warn); Debian 12 ships 0.11.
#if __has_include(<rabbitmq-c/amqp.h>)
#include <rabbitmq-c/amqp.h>
#include <rabbitmq-c/framing.h>
#include <rabbitmq-c/tcp_socket.h>
#else
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#endif

// amqp_login is variadic, which Swift cannot call.
static inline amqp_rpc_reply_t crabbitmq_login_plain(amqp_connection_state_t state, const char *vhost, int frame_max,
                                                     const char *user, const char *password) {
    return amqp_login(state, vhost, 0, frame_max, 0, AMQP_SASL_METHOD_PLAIN, user, password);
}

// The method ids are macros with casts, which Swift does not import.
static inline amqp_method_number_t crabbitmq_basic_ack(void) { return AMQP_BASIC_ACK_METHOD; }
static inline amqp_method_number_t crabbitmq_basic_nack(void) { return AMQP_BASIC_NACK_METHOD; }
static inline amqp_method_number_t crabbitmq_channel_close(void) { return AMQP_CHANNEL_CLOSE_METHOD; }
static inline amqp_method_number_t crabbitmq_connection_close(void) { return AMQP_CONNECTION_CLOSE_METHOD; }
#endif
