import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * An exactly_once_v2 word count: lines of the input topic split into words, regrouped by word (the "words"
 * repartition topic), counted in a key-value store ("word-counts", with its changelog) and in one-minute tumbling
 * windows ("windowed-counts", a window store with its changelog). Totals go to {@code <output>}, window counts to
 * {@code <output>-windowed} keyed {@code word@windowStartMs}, both with long values.
 *
 * <p>Arguments: bootstrap, application id, input topic, output topic, state directory, then any of {@code cleanup}
 * (wipe this instance's local state first, as after kafka-streams-application-reset), {@code print-acks} (print each
 * record the broker acknowledges to its producers, see {@link AckPrinter}) and {@code name=value} (a
 * Streams setting, over the ones set here). It prints one
 * JSON line per state change ({@code {"state":"RUNNING"}}) and per uncaught exception, and closes on SIGTERM
 * (printing its state once closed).
 */
public final class WordCountApp {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], input = args[2], output = args[3], stateDir = args[4];
        boolean cleanup = false;

        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // a killed instance's tasks move to the other one after this long, not after the default 45 s
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        for (String extra : Arrays.copyOfRange(args, 5, args.length)) {
            if (extra.equals("cleanup")) {
                cleanup = true;
            } else if (extra.equals("print-acks")) {
                props.put(StreamsConfig.producerPrefix(ProducerConfig.INTERCEPTOR_CLASSES_CONFIG), AckPrinter.class.getName());
            } else {
                String[] setting = extra.split("=", 2);
                props.put(setting[0], setting[1]);
            }
        }

        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> words = builder.<String, String>stream(input)
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\s+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.as("words"));
        words.count(Materialized.as("word-counts"))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        words.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofDays(1)))
            .count(Materialized.as("windowed-counts"))
            .toStream()
            .map((window, count) -> KeyValue.pair(window.key() + "@" + window.window().start(), count))
            .to(output + "-windowed", Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        if (cleanup) {
            streams.cleanUp();
        }
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("{\"state\":\"" + now + "\"}");
            System.out.flush();
        });
        streams.setUncaughtExceptionHandler(exception -> {
            System.out.println("{\"exception\":\"" + exception.getClass().getName() + "\"}");
            System.out.flush();
            exception.printStackTrace();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            // the listener may print NOT_RUNNING after close() returns, racing the JVM's exit: say it here too
            System.out.println("{\"state\":\"" + streams.state() + "\"}");
            System.out.flush();
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }
}
