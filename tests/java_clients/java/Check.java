import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

/** What every check program shares: one JSON line per result on stdout, client settings, error names. */
final class Check {
    private Check() {}

    /** Print one JSON object built from alternating keys and values. */
    static synchronized void emit(Object... kv) {
        System.out.println(encode(obj(kv)));
        System.out.flush();
    }

    static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i + 1 < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }

    static String encode(Object o) {
        StringBuilder b = new StringBuilder();
        write(b, o);
        return b.toString();
    }

    private static void write(StringBuilder b, Object o) {
        if (o == null) {
            b.append("null");
        } else if (o instanceof Number || o instanceof Boolean) {
            b.append(o);
        } else if (o instanceof Map<?, ?> m) {
            b.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) b.append(',');
                first = false;
                write(b, String.valueOf(e.getKey()));
                b.append(':');
                write(b, e.getValue());
            }
            b.append('}');
        } else if (o instanceof Collection<?> c) {
            b.append('[');
            boolean first = true;
            for (Object x : c) {
                if (!first) b.append(',');
                first = false;
                write(b, x);
            }
            b.append(']');
        } else {
            String s = o.toString();
            b.append('"');
            for (char ch : s.toCharArray()) {
                switch (ch) {
                    case '"' -> b.append("\\\"");
                    case '\\' -> b.append("\\\\");
                    case '\n' -> b.append("\\n");
                    case '\r' -> b.append("\\r");
                    case '\t' -> b.append("\\t");
                    default -> {
                        if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
                        else b.append(ch);
                    }
                }
            }
            b.append('"');
        }
    }

    /** The simple name of the exception a client call ended with, unwrapped from the future's wrapper. */
    static String error(Throwable t) {
        while ((t instanceof ExecutionException || t.getClass() == org.apache.kafka.common.KafkaException.class)
                && t.getCause() != null) {
            t = t.getCause();
        }
        return t.getClass().getSimpleName();
    }

    /** Settings every client gets: the bootstrap servers and quick retries so a refused call ends fast. */
    static Properties props(String bootstrap, Object... kv) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "30000");
        p.put("default.api.timeout.ms", "60000");
        for (int i = 0; i + 1 < kv.length; i += 2) p.put(kv[i], kv[i + 1]);
        return p;
    }

    /** Create a topic with one replica per partition (the control cluster has one broker) and wait for it. */
    static void createTopic(org.apache.kafka.clients.admin.Admin admin, String name, int partitions,
                            Map<String, String> configs) throws Exception {
        var topic = new org.apache.kafka.clients.admin.NewTopic(name, partitions, (short) 1).configs(configs);
        admin.createTopics(List.of(topic)).all().get();
        long deadline = System.currentTimeMillis() + 60_000;
        while (true) {
            try {
                var d = admin.describeTopics(List.of(name)).allTopicNames().get().get(name);
                if (d.partitions().size() == partitions
                        && d.partitions().stream().allMatch(p -> p.leader() != null && !p.leader().isEmpty())) {
                    return;
                }
            } catch (ExecutionException e) {
                if (System.currentTimeMillis() > deadline) throw e;
            }
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("no leaders for " + name);
            Thread.sleep(50);
        }
    }

    static <T> List<T> list(Iterable<T> items) {
        List<T> out = new ArrayList<>();
        items.forEach(out::add);
        return out;
    }
}
